#include "weights/safetensors.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
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

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name);
}

std::string WriteBytes(const std::string& name, const std::string& bytes) {
  const std::string path = TempPath(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::string LengthPrefix(uint64_t n) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return bytes;
}

// A file with this header text and data region.
std::string WriteSafetensors(const std::string& name, const std::string& header,
                             const std::string& data = "") {
  return WriteBytes(name, LengthPrefix(header.size()) + header + data);
}

template <typename T>
std::string Bytes(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()),
                     values.size() * sizeof(T));
}

// Opens a file with the given header over `data_bytes` zero bytes and returns
// the error message (empty when it opened).
std::string OpenError(const std::string& header, size_t data_bytes = 64) {
  const std::string path = WriteSafetensors("bad.safetensors", header,
                                            std::string(data_bytes, '\0'));
  auto file = SafetensorsFile::Open(path);
  if (file.ok()) return "";
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(path));
  return std::string(file.status().message());
}

TEST(SafetensorsTest, ReadsValidFile) {
  const std::vector<float> f32 = {1.0f, -2.5f, 3.25f, 0.0f, 1e-30f, 7.0f};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc000, 0x7f80, 0x0001};
  const std::vector<uint16_t> f16 = {0x3c00, 0x0001, 0xfc00, 0x7bff};
  const std::vector<int64_t> i64 = {-42};
  // Layout: f16 at 0..8, 4-byte hole, f32 at 12..36, bf16 at 36..44,
  // i64 at 44..52. The header lists them in a different order.
  std::string data = Bytes(f16) + std::string(4, '\xAB') + Bytes(f32) +
                     Bytes(bf16) + Bytes(i64);
  json header = {
      {"w.f32",
       {{"dtype", "F32"}, {"shape", {2, 3}}, {"data_offsets", {12, 36}}}},
      {"a.bf16",
       {{"dtype", "BF16"}, {"shape", {4}}, {"data_offsets", {36, 44}}}},
      {"z.f16",
       {{"dtype", "F16"}, {"shape", {2, 2}}, {"data_offsets", {0, 8}}}},
      {"scalar",
       {{"dtype", "I64"},
        {"shape", json::array()},
        {"data_offsets", {44, 52}}}},
      {"empty",
       {{"dtype", "F32"}, {"shape", {0, 3}}, {"data_offsets", {20, 20}}}},
      {"__metadata__", {{"format", "seqboat-canonical"}, {"version", "1"}}},
  };
  const std::string path =
      WriteSafetensors("valid.safetensors", header.dump(), data);
  auto file_or = SafetensorsFile::Open(path);
  ASSERT_TRUE(file_or.ok()) << file_or.status();
  const SafetensorsFile& file = **file_or;

  std::vector<std::string> names;
  for (const TensorView& t : file.tensors()) names.push_back(t.name);
  EXPECT_THAT(names,
              ElementsAre("z.f16", "w.f32", "empty", "a.bf16", "scalar"));

  const TensorView* w = file.Find("w.f32");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::kF32);
  EXPECT_THAT(w->shape, ElementsAre(2, 3));
  EXPECT_EQ(w->nbytes, 24u);
  std::vector<float> got(6);
  std::memcpy(got.data(), w->data, w->nbytes);
  EXPECT_EQ(got, f32);

  const TensorView* b = file.Find("a.bf16");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  std::vector<uint16_t> got16(4);
  std::memcpy(got16.data(), b->data, b->nbytes);
  EXPECT_EQ(got16, bf16);

  const TensorView* h = file.Find("z.f16");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, DType::kF16);
  EXPECT_THAT(h->shape, ElementsAre(2, 2));
  std::memcpy(got16.data(), h->data, h->nbytes);
  EXPECT_EQ(got16, f16);

  const TensorView* s = file.Find("scalar");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->shape.empty());
  int64_t scalar = 0;
  std::memcpy(&scalar, s->data, sizeof(scalar));
  EXPECT_EQ(scalar, -42);
  EXPECT_EQ(NumElements(s->shape), 1);

  const TensorView* e = file.Find("empty");
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->nbytes, 0u);

  EXPECT_EQ(file.Find("missing"), nullptr);
  EXPECT_EQ(file.Find("__metadata__"), nullptr);
  EXPECT_EQ(file.metadata().size(), 2u);
  EXPECT_EQ(file.metadata().at("format"), "seqboat-canonical");
  EXPECT_EQ(file.metadata().at("version"), "1");
}

TEST(SafetensorsTest, HeaderOnlyFileWithNoTensors) {
  auto file =
      SafetensorsFile::Open(WriteSafetensors("empty.safetensors", "{}"));
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_TRUE((*file)->tensors().empty());
  EXPECT_TRUE((*file)->metadata().empty());
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  auto file = SafetensorsFile::Open(TempPath("does_not_exist.safetensors"));
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr("does_not_exist.safetensors"));
}

TEST(SafetensorsTest, DirectoryIsRejected) {
  auto file = SafetensorsFile::Open(TempPath(""));
  EXPECT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr("not a regular file"));
}

TEST(SafetensorsTest, FileShorterThanLength) {
  const std::string path = WriteBytes("short.safetensors", "\x02\0\0\0");
  auto file = SafetensorsFile::Open(path);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr("shorter than the 8-byte header length"));
  EXPECT_THAT(std::string(file.status().message()), HasSubstr(path));
}

TEST(SafetensorsTest, HeaderLengthChecks) {
  auto open_with_length = [](uint64_t n) {
    const std::string path = WriteBytes(
        "len.safetensors", LengthPrefix(n) + "{}" + std::string(16, ' '));
    return SafetensorsFile::Open(path).status();
  };
  EXPECT_THAT(std::string(open_with_length(0).message()),
              HasSubstr("header length is 0"));
  EXPECT_THAT(std::string(open_with_length(19).message()),
              HasSubstr("runs past the end of the file"));
  EXPECT_THAT(std::string(open_with_length(200ull << 20).message()),
              HasSubstr("exceeds the limit"));
  EXPECT_THAT(std::string(open_with_length(~0ull).message()),
              HasSubstr("exceeds the limit"));
  // Trailing spaces inside the header are valid JSON padding.
  EXPECT_TRUE(open_with_length(18).ok());
}

TEST(SafetensorsTest, HeaderMustBeJsonObject) {
  EXPECT_THAT(OpenError("{\"a\": "), HasSubstr("not valid JSON"));
  EXPECT_THAT(OpenError("[1, 2]"), HasSubstr("not a JSON object"));
  EXPECT_THAT(OpenError("\"x\""), HasSubstr("not a JSON object"));
}

// A header nested a million levels deep used to exhaust the stack: the error
// for the entry serialized the whole value, one recursion per level.
TEST(SafetensorsTest, DeeplyNestedHeaderIsRefused) {
  const std::string deep =
      std::string(1000000, '[') + std::string(1000000, ']');
  EXPECT_THAT(OpenError("{\"t\": " + deep + "}"),
              HasSubstr("header arrays and objects nest deeper than 64"));
}

TEST(SafetensorsTest, MetadataMustBeObjectOfStrings) {
  EXPECT_THAT(OpenError(R"({"__metadata__": [1]})"),
              HasSubstr("__metadata__ is not an object"));
  EXPECT_THAT(OpenError(R"({"__metadata__": {"version": 1}})"),
              HasSubstr("__metadata__ \"version\" is not a string"));
}

TEST(SafetensorsTest, EntryFieldsAreChecked) {
  EXPECT_THAT(OpenError(R"({"t": 3})"),
              HasSubstr("tensor \"t\": entry must be an object"));
  EXPECT_THAT(OpenError(R"({"t": {"shape": [1], "data_offsets": [0, 4]}})"),
              HasSubstr("tensor \"t\": \"dtype\" missing"));
  EXPECT_THAT(
      OpenError(R"({"t": {"dtype": 5, "shape": [1], "data_offsets": [0, 4]}})"),
      HasSubstr("\"dtype\" missing or not a string"));
  EXPECT_THAT(OpenError(R"({"t": {"dtype": "F32", "data_offsets": [0, 4]}})"),
              HasSubstr("tensor \"t\": \"shape\" missing"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": 1, "data_offsets": [0, 4]}})"),
      HasSubstr("\"shape\" missing or not an array"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": ["1"], "data_offsets": [0, 4]}})"),
      HasSubstr("shape dims must be integers"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}})"),
      HasSubstr("shape dims must be integers"));
  EXPECT_THAT(OpenError(R"({"t": {"dtype": "F32", "shape": [1]}})"),
              HasSubstr("tensor \"t\": \"data_offsets\" must be [begin, end]"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})"),
      HasSubstr("\"data_offsets\" must be [begin, end]"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}})"),
      HasSubstr("\"data_offsets\" must be [begin, end]"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": ["0", "4"]}})"),
      HasSubstr("\"data_offsets\" must be [begin, end]"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})"),
      HasSubstr("\"data_offsets\" must be [begin, end]"));
}

TEST(SafetensorsTest, UnknownDType) {
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F8_E4M3", "shape": [1], "data_offsets": [0, 1]}})"),
      HasSubstr("tensor \"t\": unknown dtype \"F8_E4M3\""));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}})"),
      HasSubstr("unknown dtype \"f32\""));
}

TEST(SafetensorsTest, NegativeDimsAndOverflow) {
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 4]}})"),
      HasSubstr("tensor \"t\": shape dims must be non-negative"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [4294967296, 4294967296, 4], "data_offsets": [0, 4]}})"),
      HasSubstr("element count of shape"));
  // numel fits int64 but numel * 8 bytes does not.
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F64", "shape": [2305843009213693952], "data_offsets": [0, 4]}})"),
      HasSubstr("byte size of shape"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [18446744073709551615], "data_offsets": [0, 4]}})"),
      HasSubstr("non-negative and fit int64"));
}

TEST(SafetensorsTest, OffsetChecks) {
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}})"),
      HasSubstr("tensor \"t\": data_offsets [8, 4] has begin > end"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [2], "data_offsets": [60, 68]}})",
          64),
      HasSubstr("runs past the data region of 64 bytes"));
  EXPECT_THAT(
      OpenError(
          R"({"t": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 12]}})"),
      HasSubstr("span 12 bytes but F32 [2, 2] needs 16"));
}

TEST(SafetensorsTest, OverlappingTensors) {
  EXPECT_THAT(
      OpenError(R"({
      "a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [12, 20]}})"),
      HasSubstr("tensors \"a\" and \"b\" have overlapping data_offsets"));
  // Same range twice.
  EXPECT_THAT(OpenError(R"({
      "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "b": {"dtype": "I32", "shape": [2], "data_offsets": [0, 8]}})"),
              HasSubstr("overlapping"));
  // One range inside a longer earlier one, after an empty tensor.
  EXPECT_THAT(OpenError(R"({
      "a": {"dtype": "F32", "shape": [8], "data_offsets": [0, 32]},
      "e": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]},
      "c": {"dtype": "U8", "shape": [1], "data_offsets": [30, 31]}})"),
              HasSubstr("tensors \"a\" and \"c\""));
  // Touching ranges and an empty tensor inside another are fine.
  EXPECT_EQ(OpenError(R"({
      "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
      "e": {"dtype": "BOOL", "shape": [0], "data_offsets": [4, 4]},
      "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})"),
            "");
}

TEST(SafetensorsTest, DuplicateNamesAreRejected) {
  EXPECT_THAT(OpenError(R"({
      "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
      "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})"),
              HasSubstr("duplicate key \"a\""));
  // Also inside an entry: which dtype was meant is unknowable.
  EXPECT_THAT(OpenError(R"({
      "a": {"dtype": "F32", "dtype": "F16", "shape": [1], "data_offsets": [0, 4]}})"),
              HasSubstr("duplicate key \"dtype\""));
  // The same key in two different objects is not a duplicate.
  EXPECT_EQ(OpenError(R"({
      "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
      "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})"),
            "");
}

TEST(SafetensorsTest, DTypeNamesRoundTrip) {
  for (DType d :
       {DType::kF32, DType::kF16, DType::kBF16, DType::kF64, DType::kI64,
        DType::kI32, DType::kI16, DType::kI8, DType::kU8, DType::kBool}) {
    DType parsed;
    ASSERT_TRUE(ParseDType(DTypeName(d), &parsed)) << DTypeName(d);
    EXPECT_EQ(parsed, d);
    EXPECT_GT(DTypeSize(d), 0u);
  }
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(ShapeString({3, 1, 4}), "[3, 1, 4]");
  EXPECT_EQ(ShapeString({}), "[]");
}

}  // namespace
}  // namespace seqboat
