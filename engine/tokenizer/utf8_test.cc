#include "engine/tokenizer/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

struct Case {
  std::string in;
  std::string want;
};

// Expected values are Python's bytes.decode("utf-8", "replace"), which uses
// the same maximal-subpart policy.
TEST(Utf8LossyTest, MatchesMaximalSubpartPolicy) {
  const Case cases[] = {
      {"\x61\x62\x63", "\x61\x62\x63"},
      {"\xC3\xA9", "\xC3\xA9"},
      {"\xC3", "\xEF\xBF\xBD"},
      {"\xE2\x82", "\xEF\xBF\xBD"},
      {"\xE2\x82\xAC", "\xE2\x82\xAC"},
      {"\xE2\x28\xA1", "\xEF\xBF\xBD\x28\xEF\xBF\xBD"},
      {"\xED\xA0\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xE0\x80\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xF0\x9F\x98\x80", "\xF0\x9F\x98\x80"},
      {"\xF0\x9F\x98", "\xEF\xBF\xBD"},
      {"\xF4\x90\x80\x80", "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xC0\xAF", "\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\xFF\xFE", "\xEF\xBF\xBD\xEF\xBF\xBD"},
      {"\x80\x61\x62\x63", "\xEF\xBF\xBD\x61\x62\x63"},
      {"\x61\xF0\x9F\x98\x62", "\x61\xEF\xBF\xBD\x62"},
      {"\xE2\x82\xE2\x82\xAC", "\xEF\xBF\xBD\xE2\x82\xAC"},
      {std::string("a\0b", 3), std::string("a\0b", 3)},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(Utf8Lossy(c.in), c.want) << c.in;
  }
}

TEST(Utf8LossyTest, NonFinalHoldsBackOnlyAValidIncompleteTail) {
  std::string out;
  // "a" + first two bytes of the euro sign: the tail may still complete.
  EXPECT_EQ(DecodeUtf8Lossy("a\xE2\x82", /*final=*/false, &out), 1u);
  EXPECT_EQ(out, "a");

  // A tail already known invalid (ED A0 is a surrogate) is not held back.
  out.clear();
  EXPECT_EQ(DecodeUtf8Lossy("a\xED\xA0", /*final=*/false, &out), 3u);
  EXPECT_EQ(out, "a\xEF\xBF\xBD\xEF\xBF\xBD");

  out.clear();
  EXPECT_EQ(DecodeUtf8Lossy("a\xE2\x82", /*final=*/true, &out), 3u);
  EXPECT_EQ(out, "a\xEF\xBF\xBD");
}

}  // namespace
}  // namespace seqboat
