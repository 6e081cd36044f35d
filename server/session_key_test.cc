#include "server/session_key.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

TEST(SessionKeyTest, ASentKeyIsKeptAsIs) {
  auto k = SessionKey(std::string("conversation-42"), "tenant", {1, 2, 3});
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(*k, "conversation-42");
}

TEST(SessionKeyTest, ABadKeyIsRefusedNamingTheHeader) {
  for (const std::string bad :
       {std::string(), std::string("has space"), std::string(129, 'k'),
        std::string("tab\there"), std::string("caf\xc3\xa9")}) {
    auto k = SessionKey(bad, "", {1});
    ASSERT_FALSE(k.ok()) << bad;
    EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(k.status().message().find("x-session-id"), std::string::npos);
  }
  EXPECT_TRUE(SessionKey(std::string(128, 'k'), "", {1}).ok());
}

TEST(SessionKeyTest, ADerivedKeyDependsOnScopeAndPrompt) {
  const auto a = SessionKey(std::nullopt, "t", {1, 2, 3});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 18u);
  EXPECT_EQ(a->rfind("s-", 0), 0u);
  EXPECT_EQ(*a, *SessionKey(std::nullopt, "t", {1, 2, 3}));
  EXPECT_NE(*a, *SessionKey(std::nullopt, "u", {1, 2, 3}));
  EXPECT_NE(*a, *SessionKey(std::nullopt, "t", {1, 2, 4}));
  // A derived key is itself a valid key to send back.
  EXPECT_TRUE(SessionKey(*a, "t", {9}).ok());
}

}  // namespace
}  // namespace seqboat
