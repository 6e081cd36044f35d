#include "base/file_text.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

std::string TempFile(const std::string& name, const std::string& text) {
  const std::string path =
      std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR")
                                             : "/tmp") +
      "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(text.data(), 1, text.size(), f);
  std::fclose(f);
  return path;
}

TEST(ReadFileTextTest, ReadsWholeFileWithinTheBound) {
  const std::string text(100000, 'x');
  auto got = ReadFileText(TempFile("whole.txt", text), 100000);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, text);
}

TEST(ReadFileTextTest, RefusesFilesPastTheBoundNamingThem) {
  const std::string path = TempFile("big.txt", std::string(100001, 'x'));
  auto got = ReadFileText(path, 100000);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(got.status().message().find(path), std::string::npos);
  EXPECT_NE(got.status().message().find("larger than 100000"),
            std::string::npos);
}

TEST(ReadFileTextTest, MissingFileIsNotFoundNamingIt) {
  auto got = ReadFileText("/nonexistent/dir/x.json", 10);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(got.status().message().find("/nonexistent/dir/x.json"),
            std::string::npos);
}

TEST(ReadFileTextTest, DirectoryIsAReadErrorNotAnEmptyText) {
  auto got = ReadFileText(
      std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp", 10);
  EXPECT_FALSE(got.ok());
}

}  // namespace
}  // namespace seqboat
