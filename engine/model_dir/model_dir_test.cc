#include "engine/model_dir/model_dir.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using ::testing::HasSubstr;

namespace fs = std::filesystem;

// A copy of a bundled model directory that a test may break.
std::string CopyOf(const std::string& source, const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const fs::path dir = fs::path(tmp != nullptr ? tmp : "/tmp") / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(source)) {
    if (entry.path().filename() == "BUILD") continue;
    fs::copy_file(entry.path(), dir / entry.path().filename());
  }
  return dir.string();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

TEST(ModelDirTest, OpensTheCanonicalFilesOnce) {
  auto dir = ModelDir::Open("tests/data/tiny_mamba");
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_THAT((*dir)->config_json(), HasSubstr("\"blocks\""));
  EXPECT_THAT((*dir)->tokenizer_json(), HasSubstr("\"model\""));
  EXPECT_FALSE((*dir)->tokenizer_config_json().has_value());
  auto stored = (*dir)->StoredMatrixType();
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(*stored, "fp32");
  auto weights = (*dir)->weights();
  ASSERT_TRUE(weights.ok());
  EXPECT_TRUE((*weights)->Has("embed.weight"));
}

TEST(ModelDirTest, ReportsTheTemplateSourceAndTheStoredType) {
  auto dir = ModelDir::Open("weights/models/default");
  ASSERT_TRUE(dir.ok()) << dir.status();
  ASSERT_TRUE((*dir)->tokenizer_config_json().has_value());
  EXPECT_THAT(*(*dir)->tokenizer_config_json(), HasSubstr("chat_template"));
  auto stored = (*dir)->StoredMatrixType();
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_THAT(*stored, ::testing::AnyOf("fp32", "bf16", "fp16"));
}

TEST(ModelDirTest, ClosedWeightsAreAnErrorNotACrash) {
  auto dir = ModelDir::Open("tests/data/tiny_mamba");
  ASSERT_TRUE(dir.ok()) << dir.status();
  (*dir)->CloseWeights();
  EXPECT_EQ((*dir)->weights().status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ((*dir)->StoredMatrixType().status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The text files stay: the engine builds its tokenizer after the model.
  EXPECT_FALSE((*dir)->tokenizer_json().empty());
}

TEST(ModelDirTest, EachMissingRequiredFileIsNamed) {
  for (const char* file :
       {"config.json", "model.safetensors", "tokenizer.json"}) {
    const std::string dir = CopyOf("tests/data/tiny_mamba", "missing");
    fs::remove(fs::path(dir) / file);
    auto opened = ModelDir::Open(dir);
    ASSERT_FALSE(opened.ok()) << file;
    EXPECT_THAT(opened.status().message(), HasSubstr(file));
  }
}

TEST(ModelDirTest, TruncatedSafetensorsIsRefusedNamingTheFile) {
  const std::string dir = CopyOf("tests/data/tiny_mamba", "truncated");
  // A header length of 16 bytes, then 4 of them.
  Write(dir + "/model.safetensors",
        std::string("\x10\0\0\0\0\0\0\0{\"a\"", 12));
  auto opened = ModelDir::Open(dir);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("model.safetensors"));
}

TEST(ModelDirTest, UnreadableTokenizerConfigIsAnErrorNotAbsence) {
  const std::string dir = CopyOf("tests/data/tiny_mamba", "config_dir");
  fs::create_directory(fs::path(dir) / "tokenizer_config.json");
  auto opened = ModelDir::Open(dir);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("tokenizer_config.json"));
}

}  // namespace
}  // namespace seqboat
