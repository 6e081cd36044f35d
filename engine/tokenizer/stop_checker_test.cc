#include "engine/tokenizer/stop_checker.h"

#include <optional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

TEST(StopCheckerTest, EmptyStopListPassesEverythingThrough) {
  StopChecker checker({});
  std::optional<std::string> matched;
  EXPECT_EQ(checker.Push("hello", &matched), "hello");
  EXPECT_FALSE(matched.has_value());
  EXPECT_EQ(checker.Flush(), "");
}

TEST(StopCheckerTest, EmptyStopStringsAreIgnored) {
  StopChecker checker({""});
  std::optional<std::string> matched;
  EXPECT_EQ(checker.Push("abc", &matched), "abc");
  EXPECT_FALSE(matched.has_value());
}

TEST(StopCheckerTest, StopInsideOnePush) {
  StopChecker checker({"END"});
  std::optional<std::string> matched;
  EXPECT_EQ(checker.Push("hi ENDthere", &matched), "hi ");
  EXPECT_EQ(matched, "END");
  EXPECT_TRUE(checker.stopped());
  // Text after the match is dropped, later pushes too.
  EXPECT_EQ(checker.Push("more", &matched), "");
  EXPECT_FALSE(matched.has_value());
  EXPECT_EQ(checker.Flush(), "");
}

TEST(StopCheckerTest, StopSpanningSeveralPushes) {
  StopChecker checker({"STOP"});
  std::optional<std::string> matched;
  EXPECT_EQ(checker.Push("abS", &matched), "ab");
  EXPECT_EQ(checker.Push("T", &matched), "");
  EXPECT_EQ(checker.Push("O", &matched), "");
  EXPECT_FALSE(matched.has_value());
  EXPECT_EQ(checker.Push("Px", &matched), "");
  EXPECT_EQ(matched, "STOP");
}

TEST(StopCheckerTest, HeldBackTextReleasedWhenItStopsMatching) {
  StopChecker checker({"STOP"});
  std::optional<std::string> matched;
  EXPECT_EQ(checker.Push("xST", &matched), "x");
  EXPECT_EQ(checker.Push("AR", &matched), "STAR");
  EXPECT_EQ(checker.Push("ST", &matched), "");
  EXPECT_EQ(checker.Flush(), "ST");
}

TEST(StopCheckerTest, HeldBackAcrossRestartOfPrefix) {
  // "SSTOP": the first S is not part of the stop, the second starts it.
  StopChecker checker({"STOP"});
  std::optional<std::string> matched;
  EXPECT_EQ(checker.Push("S", &matched), "");
  EXPECT_EQ(checker.Push("S", &matched), "S");
  EXPECT_EQ(checker.Push("TOP", &matched), "");
  EXPECT_EQ(matched, "STOP");
}

TEST(StopCheckerTest, OverlappingPrefixes) {
  {
    StopChecker checker({"ab", "abc"});
    std::optional<std::string> matched;
    EXPECT_EQ(checker.Push("aab", &matched), "a");
    EXPECT_EQ(matched, "ab");
  }
  {
    // "ab" completes first, so it wins even though "abc" might follow.
    StopChecker checker({"abc", "ab"});
    std::optional<std::string> matched;
    EXPECT_EQ(checker.Push("a", &matched), "");
    EXPECT_EQ(checker.Push("a", &matched), "a");
    EXPECT_EQ(checker.Push("b", &matched), "");
    EXPECT_EQ(matched, "ab");
  }
  {
    // Both end at the same place: the longer one wins.
    StopChecker checker({"c", "abc"});
    std::optional<std::string> matched;
    EXPECT_EQ(checker.Push("xxabc", &matched), "xx");
    EXPECT_EQ(matched, "abc");
  }
  {
    // "bc" ends before "abcd" would.
    StopChecker checker({"abcd", "bc"});
    std::optional<std::string> matched;
    EXPECT_EQ(checker.Push("abcd", &matched), "a");
    EXPECT_EQ(matched, "bc");
  }
}

TEST(StopCheckerTest, Utf8Stops) {
  StopChecker checker({"\xE2\x82\xAC\xE2\x82\xAC"});  // two euro signs
  std::optional<std::string> matched;
  EXPECT_EQ(checker.Push("caf\xC3\xA9 \xE2\x82\xAC", &matched), "caf\xC3\xA9 ");
  EXPECT_EQ(checker.Push("5", &matched),
            "\xE2\x82\xAC"
            "5");
  EXPECT_EQ(checker.Push("\xE2\x82\xAC", &matched), "");
  EXPECT_EQ(checker.Push("\xE2\x82\xAC!", &matched), "");
  EXPECT_EQ(matched, "\xE2\x82\xAC\xE2\x82\xAC");
}

TEST(StopCheckerTest, NullMatchedPointerIsAllowed) {
  StopChecker checker({"x"});
  EXPECT_EQ(checker.Push("abxc", nullptr), "ab");
  EXPECT_TRUE(checker.stopped());
}

// Any split of the text into pushes gives the same emitted text and match as
// a single push.
TEST(StopCheckerTest, ResultIndependentOfHowTextIsSplit) {
  std::mt19937 rng(99);
  const std::vector<std::string> stops = {"aba", "bb", "abc", "cab"};
  for (int trial = 0; trial < 500; ++trial) {
    std::string text;
    const int len = 1 + static_cast<int>(rng() % 20);
    for (int i = 0; i < len; ++i) text.push_back("abcx"[rng() % 4]);

    StopChecker whole(stops);
    std::optional<std::string> whole_match;
    std::string whole_out = whole.Push(text, &whole_match);
    if (!whole_match) whole_out += whole.Flush();

    StopChecker pieces(stops);
    std::optional<std::string> piece_match;
    std::string piece_out;
    for (size_t pos = 0; pos < text.size() && !piece_match;) {
      const size_t n = std::min<size_t>(1 + rng() % 3, text.size() - pos);
      piece_out += pieces.Push(text.substr(pos, n), &piece_match);
      pos += n;
    }
    if (!piece_match) piece_out += pieces.Flush();

    ASSERT_EQ(piece_out, whole_out) << text;
    ASSERT_EQ(piece_match, whole_match) << text;
    // The emitted text never contains a stop string.
    for (const std::string& stop : stops) {
      EXPECT_EQ(whole_out.find(stop), std::string::npos) << text;
    }
  }
}

// Pushes that may not stop (before min_new_tokens) pass complete stop
// strings through as text, yet keep holding back what may still become one.
TEST(StopCheckerTest, PushesThatMayNotStopKeepStopStringsAsText) {
  StopChecker checker({"ab", "abc"});
  std::optional<std::string> matched;
  EXPECT_EQ(checker.Push("xab", &matched, /*may_stop=*/false), "x");
  EXPECT_FALSE(matched.has_value());  // "ab" held: it may become "abc"
  EXPECT_EQ(checker.Push("d", &matched, /*may_stop=*/false), "abd");
  EXPECT_EQ(checker.Push("a", &matched), "");
  // "ab" ends in a push that may stop: a match.
  EXPECT_EQ(checker.Push("b", &matched), "");
  ASSERT_TRUE(matched.has_value());
  EXPECT_EQ(*matched, "ab");

  StopChecker late({"abc"});
  EXPECT_EQ(late.Push("ab", &matched, /*may_stop=*/false), "");
  // Begun while it could not stop, ended when it can: a match.
  EXPECT_EQ(late.Push("c", &matched), "");
  ASSERT_TRUE(matched.has_value());
  EXPECT_EQ(*matched, "abc");
}

}  // namespace
}  // namespace seqboat
