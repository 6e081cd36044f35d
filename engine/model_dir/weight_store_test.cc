#include "engine/model_dir/weight_store.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

// Writes a safetensors file whose data region starts 8-byte aligned (the
// header is space-padded), so offsets in `header` decide alignment.
std::string WriteFile(const std::string& name, const json& header,
                      const std::string& data) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) {
    bytes[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  }
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes << text << data;
  return path;
}

json Entry(const char* dtype, std::vector<int64_t> shape, size_t begin,
           size_t end) {
  return {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
}

class WeightStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // f32 "w" aligned at 0..24; f16 "h" at 24..30; f32 "u" unaligned at
    // 30..38; bf16 "b" at 38..44; i32 "i" at 44..48.
    const std::vector<float> w = {1.0f, -2.0f, 0.5f, 3.0f, 4.0f, -0.25f};
    const std::vector<uint16_t> h = {0x3c00, 0x0001, 0xfc00};
    const std::vector<float> u = {7.5f, -8.0f};
    const std::vector<uint16_t> b = {0x3f80, 0xc040, 0x7f80};
    const std::vector<int32_t> i = {5};
    json header = {
        {"w", Entry("F32", {2, 3}, 0, 24)},
        {"h", Entry("F16", {3}, 24, 30)},
        {"u", Entry("F32", {2}, 30, 38)},
        {"b", Entry("BF16", {1, 3}, 38, 44)},
        {"i", Entry("I32", {1}, 44, 48)},
    };
    path_ = WriteFile("store.safetensors", header,
                      Bytes(w) + Bytes(h) + Bytes(u) + Bytes(b) + Bytes(i));
    auto store = WeightStore::Open(path_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }

  std::string path_;
  std::unique_ptr<WeightStore> store_;
};

TEST_F(WeightStoreTest, AlignedF32PointsIntoTheFile) {
  auto w = store_->F32("w", {2, 3});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w, store_->file().Find("w")->data);
  EXPECT_THAT(std::vector<float>(*w, *w + 6),
              ElementsAre(1.0f, -2.0f, 0.5f, 3.0f, 4.0f, -0.25f));
}

TEST_F(WeightStoreTest, UnalignedF32IsCopied) {
  auto u = store_->F32("u", {2});
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_NE(static_cast<const void*>(*u), store_->file().Find("u")->data);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(*u) % alignof(float), 0u);
  EXPECT_THAT(std::vector<float>(*u, *u + 2), ElementsAre(7.5f, -8.0f));
}

TEST_F(WeightStoreTest, HalfFloatsAreConvertedOnce) {
  auto h = store_->F32("h", {3});
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_THAT(std::vector<float>(*h, *h + 3),
              ElementsAre(1.0f, 5.9604644775390625e-08f,
                          -std::numeric_limits<float>::infinity()));
  auto b = store_->F32("b", {1, 3});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(std::vector<float>(*b, *b + 3),
              ElementsAre(1.0f, -3.0f, std::numeric_limits<float>::infinity()));
  auto b_again = store_->F32("b", {1, 3});
  ASSERT_TRUE(b_again.ok());
  EXPECT_EQ(*b_again, *b);
}

TEST_F(WeightStoreTest, ShapeMismatchNamesTensorAndShapes) {
  auto w = store_->F32("w", {3, 2});
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      std::string(w.status().message()),
      absl::StrCat(path_, ": tensor \"w\" has shape [2, 3], expected [3, 2]"));
  auto raw = store_->Raw("b", {3});
  EXPECT_THAT(std::string(raw.status().message()),
              HasSubstr("tensor \"b\" has shape [1, 3], expected [3]"));
}

TEST_F(WeightStoreTest, MissingTensorIsNamed) {
  EXPECT_FALSE(store_->Has("lm_head.weight"));
  auto t = store_->F32("lm_head.weight", {4, 2});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(
      std::string(t.status().message()),
      absl::StrCat(path_,
                   ": missing tensor \"lm_head.weight\" (expected [4, 2])"));
}

TEST_F(WeightStoreTest, NonFloatDTypeIsRejectedByF32ButNotRaw) {
  auto i = store_->F32("i", {1});
  EXPECT_EQ(i.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(
      std::string(i.status().message()),
      HasSubstr("tensor \"i\" has dtype I32, expected F32, BF16 or F16"));
  auto raw = store_->Raw("i", {1});
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ((*raw)->dtype, DType::kI32);
}

TEST_F(WeightStoreTest, RawKeepsDType) {
  auto raw = store_->Raw("b", {1, 3});
  ASSERT_TRUE(raw.ok()) << raw.status();
  EXPECT_EQ((*raw)->dtype, DType::kBF16);
  EXPECT_EQ((*raw)->nbytes, 6u);
}

TEST_F(WeightStoreTest, CheckAllUsedListsEveryUnfetchedTensor) {
  EXPECT_TRUE(store_->Has("w"));
  auto status = store_->CheckAllUsed();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(std::string(status.message()),
            absl::StrCat(path_, ": unknown tensors: w, h, u, b, i"));

  ASSERT_TRUE(store_->F32("w", {2, 3}).ok());
  ASSERT_TRUE(store_->F32("h", {3}).ok());
  ASSERT_TRUE(store_->Raw("b", {1, 3}).ok());
  // A failed fetch does not count as use.
  ASSERT_FALSE(store_->F32("u", {3}).ok());
  EXPECT_EQ(std::string(store_->CheckAllUsed().message()),
            absl::StrCat(path_, ": unknown tensors: u, i"));

  ASSERT_TRUE(store_->F32("u", {2}).ok());
  ASSERT_TRUE(store_->Raw("i", {1}).ok());
  EXPECT_TRUE(store_->CheckAllUsed().ok());
}

TEST(WeightStoreOpenTest, PropagatesFileErrors) {
  auto missing = WeightStore::Open("/nonexistent/model.safetensors");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("/nonexistent/model.safetensors"));
}

}  // namespace
}  // namespace seqboat
