#include "engine/tokenizer/normalizer.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace {

using ::testing::HasSubstr;

Normalizer MustParse(const std::string& json_text) {
  absl::StatusOr<Normalizer> n =
      Normalizer::Parse(nlohmann::json::parse(json_text), "normalizer");
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? *std::move(n) : Normalizer();
}

// Strings the forms disagree on (UTF-8 spelled out, so the source file's
// own normalization cannot matter).
constexpr char kEAcuteComposed[] = "\xC3\xA9";     // U+00E9
constexpr char kEAcuteDecomposed[] = "e\xCC\x81";  // e U+0301
constexpr char kFiLigature[] = "\xEF\xAC\x81";     // U+FB01
constexpr char kHangulJamo[] =
    "\xE1\x84\x80"                                       // U+1100
    "\xE1\x85\xA1"                                       // U+1161
    "\xE1\x86\xA8";                                      // U+11A8
constexpr char kHangulSyllable[] = "\xEA\xB0\x81";       // U+AC01
constexpr char kVietComposed[] = "\xE1\xBB\x87";         // U+1EC7
constexpr char kVietDecomposed[] = "e\xCC\xA3\xCC\x82";  // e U+0323 U+0302
// The same marks in the other order: canonical reordering puts U+0323
// (class 220) before U+0302 (class 230).
constexpr char kVietMarksSwapped[] = "e\xCC\x82\xCC\xA3";

TEST(NormalizerTest, Nfc) {
  const Normalizer n = MustParse(R"({"type": "NFC"})");
  EXPECT_FALSE(n.empty());
  EXPECT_EQ(n.Normalize(kEAcuteDecomposed), kEAcuteComposed);
  EXPECT_EQ(n.Normalize(kHangulJamo), kHangulSyllable);
  EXPECT_EQ(n.Normalize(kVietDecomposed), kVietComposed);
  EXPECT_EQ(n.Normalize(kVietMarksSwapped), kVietComposed);
  // Compatibility characters are left alone.
  EXPECT_EQ(n.Normalize(kFiLigature), kFiLigature);
  EXPECT_EQ(n.Normalize(""), "");
  EXPECT_EQ(n.Normalize("plain ascii\n"), "plain ascii\n");
}

TEST(NormalizerTest, Nfd) {
  const Normalizer n = MustParse(R"({"type": "NFD"})");
  EXPECT_EQ(n.Normalize(kEAcuteComposed), kEAcuteDecomposed);
  EXPECT_EQ(n.Normalize(kHangulSyllable), kHangulJamo);
  EXPECT_EQ(n.Normalize(kVietComposed), kVietDecomposed);
  EXPECT_EQ(n.Normalize(kVietMarksSwapped), kVietDecomposed);
  EXPECT_EQ(n.Normalize(kFiLigature), kFiLigature);
}

TEST(NormalizerTest, Nfkc) {
  const Normalizer n = MustParse(R"({"type": "NFKC"})");
  EXPECT_EQ(n.Normalize(kFiLigature), "fi");
  EXPECT_EQ(n.Normalize("\xE2\x91\xA0"), "1");  // U+2460 circled one
  EXPECT_EQ(n.Normalize("\xEF\xBC\xA1"), "A");  // U+FF21 fullwidth A
  EXPECT_EQ(n.Normalize(kEAcuteDecomposed), kEAcuteComposed);
  EXPECT_EQ(n.Normalize(kHangulJamo), kHangulSyllable);
}

TEST(NormalizerTest, Nfkd) {
  const Normalizer n = MustParse(R"({"type": "NFKD"})");
  EXPECT_EQ(n.Normalize(kFiLigature), "fi");
  EXPECT_EQ(n.Normalize(kEAcuteComposed), kEAcuteDecomposed);
  EXPECT_EQ(n.Normalize(kHangulSyllable), kHangulJamo);
  // UAX #15's example: U+1E9B U+0323 becomes s U+0323 U+0307.
  EXPECT_EQ(n.Normalize("\xE1\xBA\x9B\xCC\xA3"), "s\xCC\xA3\xCC\x87");
}

TEST(NormalizerTest, SequenceAppliesStepsInOrder) {
  // Decomposing first exposes the accent to the Replace.
  const Normalizer strip = MustParse(R"({"type": "Sequence", "normalizers": [
      {"type": "NFD"},
      {"type": "Replace", "pattern": {"String": "\u0301"}, "content": ""}]})");
  EXPECT_EQ(strip.Normalize(std::string("caf") + kEAcuteComposed), "cafe");
  // The other way round the Replace finds nothing.
  const Normalizer late = MustParse(R"({"type": "Sequence", "normalizers": [
      {"type": "Replace", "pattern": {"String": "\u0301"}, "content": ""},
      {"type": "NFD"}]})");
  EXPECT_EQ(late.Normalize(std::string("caf") + kEAcuteComposed),
            std::string("caf") + kEAcuteDecomposed);
  // A prefix added before NFKC is normalized with the text; one added after
  // it is not.
  const Normalizer before = MustParse(R"({"type": "Sequence", "normalizers": [
      {"type": "Prepend", "prepend": "\ufb01"}, {"type": "NFKC"}]})");
  EXPECT_EQ(before.Normalize("x"), "fix");
  const Normalizer after = MustParse(R"({"type": "Sequence", "normalizers": [
      {"type": "NFKC"}, {"type": "Prepend", "prepend": "\ufb01"}]})");
  EXPECT_EQ(after.Normalize("x"), std::string(kFiLigature) + "x");
}

TEST(NormalizerTest, InvalidBytesAreKeptAndSplitRuns) {
  const Normalizer nfc = MustParse(R"({"type": "NFC"})");
  // ICU alone would turn each bad byte into U+FFFD; they stay, and a mark
  // after one has no starter to compose with.
  EXPECT_EQ(nfc.Normalize("e\xFF\xCC\x81"), "e\xFF\xCC\x81");
  EXPECT_EQ(nfc.Normalize(std::string("\xC3") + kEAcuteDecomposed + "\x80"),
            std::string("\xC3") + kEAcuteComposed + "\x80");
  // A cut-off sequence, an encoded surrogate and an overlong form.
  for (const std::string bad : {"\xE2\x82", "\xED\xA0\x80", "\xC0\xAF"}) {
    EXPECT_EQ(nfc.Normalize(bad + kEAcuteDecomposed + bad),
              bad + kEAcuteComposed + bad);
  }
  const Normalizer nfkd = MustParse(R"({"type": "NFKD"})");
  EXPECT_EQ(nfkd.Normalize(std::string(kFiLigature) + "\xF5" + kFiLigature),
            "fi\xF5"
            "fi");
  // NUL is a character like any other.
  EXPECT_EQ(nfc.Normalize(std::string("a\0e\xCC\x81", 5)),
            std::string("a\0\xC3\xA9", 4));
}

TEST(NormalizerTest, UnsupportedKindsNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  const Case cases[] = {
      {R"({"type": "Lowercase"})", "normalizer.type"},
      {R"({"type": "BertNormalizer"})", "normalizer.type"},
      {R"({"type": "Strip", "left": true, "right": true})", "normalizer.type"},
      {R"({"type": "Sequence", "normalizers": [{"type": "NFC"},
          {"type": "StripAccents"}]})",
       "normalizer.normalizers[1].type"},
      {R"({"type": "Sequence", "normalizers": [{"type": "NFKC"},
          {"type": "Replace", "pattern": {"Regex": " +"}, "content": " "}]})",
       "normalizer.normalizers[1].pattern"},
      {R"({"type": "nfc"})", "normalizer.type"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Normalizer> n =
        Normalizer::Parse(nlohmann::json::parse(c.json), "normalizer");
    ASSERT_FALSE(n.ok()) << c.json;
    EXPECT_EQ(n.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(std::string(n.status().message()), HasSubstr(c.field))
        << c.json;
  }
}

}  // namespace
}  // namespace seqboat
