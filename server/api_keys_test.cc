// The keys file's parse (its refusals name file and line, never the key),
// the Bearer header, reload and revocation, and timing: a right key, a wrong
// key that shares all but its last byte with it and one wrong from its first
// byte take the same time, as do equal and unequal buffers in the compare.
#include "server/api_keys.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

const std::string kKeyA = "sk-aaaaaaaaaaaaaaaaaaaaaaaa";
const std::string kKeyB = "sk-bbbbbbbbbbbbbbbbbbbbbbbb";

TEST(ApiKeysTest, ParsesKeysTenantsCommentsAndBlankLines) {
  auto keys = ApiKeys::Parse(
      absl::StrCat("# operators\n\n", kKeyA, "\n  ", kKeyB, "\tteam-b  \n"),
      "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status();
  EXPECT_EQ(keys->size(), 2u);
  EXPECT_EQ(keys->TenantOf(kKeyA), kDefaultTenant);
  EXPECT_EQ(keys->TenantOf(kKeyB), "team-b");
  EXPECT_EQ(keys->TenantOf("sk-cccccccccccccccccccccccc"), std::nullopt);
  EXPECT_EQ(keys->TenantOf(""), std::nullopt);
  EXPECT_EQ(keys->TenantOf(kKeyA.substr(0, kKeyA.size() - 1)), std::nullopt);
}

TEST(ApiKeysTest, MalformedLinesNameFileAndLineButNeverTheKey) {
  const std::string secret = "sk-this-is-a-secret-key";
  const struct {
    std::string text;
    std::string expect;
  } cases[] = {
      {absl::StrCat("# c\n", secret, " t extra\n"),
       "keys.txt line 2: field 3 is not a quota NAME=VALUE"},
      {absl::StrCat(secret, " t max_sequences=-1\n"),
       "keys.txt line 1: max_sequences must be an integer >= 0, got '-1'"},
      {absl::StrCat(secret, " t tokens_per_second=fast\n"),
       "keys.txt line 1: tokens_per_second must be a number >= 0"},
      {absl::StrCat(secret, " t requests_per_second=1 requests_per_second=2\n"),
       "keys.txt line 1: requests_per_second twice"},
      {absl::StrCat(secret, " t speed=3\n"),
       "keys.txt line 1: field 3 names no quota"},
      {absl::StrCat(secret,
                    " t max_sequences=2\nsk-another-key-0123456 t "
                    "max_sequences=3\n"),
       "keys.txt line 2: tenant 't' was given other quotas on line 1"},
      {"\nshort\n", "keys.txt line 2: the key is 5 bytes"},
      {absl::StrCat(secret, " bad/tenant\n"),
       "keys.txt line 1: tenant 'bad/tenant' is not"},
      {absl::StrCat(secret, "\n", secret, " t\n"),
       "keys.txt line 2: the key of line 1 again"},
      {absl::StrCat(std::string(kMaxApiKeyBytes + 1, 'k'), "\n"),
       "keys.txt line 1: the key is 4097 bytes"},
  };
  for (const auto& c : cases) {
    auto keys = ApiKeys::Parse(c.text, "keys.txt");
    ASSERT_FALSE(keys.ok()) << c.text;
    EXPECT_EQ(keys.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(keys.status().message().find(c.expect), std::string::npos)
        << keys.status();
    EXPECT_EQ(keys.status().message().find("secret"), std::string::npos)
        << keys.status();
  }
}

TEST(ApiKeysTest, QuotasOfATenantFromItsLines) {
  auto keys = ApiKeys::Parse(
      absl::StrCat(kKeyA, " team-a max_sequences=4 tokens_per_second=250.5\n",
                   kKeyB, " team-a max_sequences=4 tokens_per_second=250.5\n",
                   "sk-cccccccccccccccccccccccc team-a\n",
                   "sk-dddddddddddddddddddddddd team-b\n"),
      "keys.txt");
  ASSERT_TRUE(keys.ok()) << keys.status();
  const QuotaOverrides a = keys->QuotasOf("team-a");
  EXPECT_EQ(a.max_sequences, 4);
  EXPECT_EQ(a.tokens_per_second, 250.5);
  EXPECT_FALSE(a.requests_per_second.has_value());
  EXPECT_TRUE(keys->QuotasOf("team-b").empty());
  EXPECT_TRUE(keys->QuotasOf("nobody").empty());
}

TEST(ApiKeysTest, BearerToken) {
  EXPECT_EQ(BearerToken("Bearer abc"), "abc");
  EXPECT_EQ(BearerToken("bearer   abc "), "abc");
  EXPECT_EQ(BearerToken("Basic abc"), "");
  EXPECT_EQ(BearerToken("Bearer"), "");
  EXPECT_EQ(BearerToken(""), "");
}

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = absl::StrCat(
      std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp", "/",
      name);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  return path;
}

TEST(ApiKeyStoreTest, ReloadRevokesARemovedKeyAndKeepsTheLastGoodSet) {
  const std::string path =
      WriteFile("keys", absl::StrCat(kKeyA, " a\n", kKeyB, " b\n"));
  auto store = ApiKeyStore::Open(path);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Authorize("Bearer " + kKeyB), "b");
  EXPECT_EQ((*store)->Authorize(kKeyB), std::nullopt);  // not Bearer
  EXPECT_EQ((*store)->Authorize(""), std::nullopt);
  WriteFile("keys", absl::StrCat(kKeyA, " a\n"));
  ASSERT_TRUE((*store)->Reload().ok());
  EXPECT_EQ((*store)->Authorize("Bearer " + kKeyB), std::nullopt);
  EXPECT_EQ((*store)->Authorize("Bearer " + kKeyA), "a");
  // A broken file leaves the keys in force and says where it is broken.
  WriteFile("keys", "oops\n");
  const absl::Status bad = (*store)->Reload();
  EXPECT_NE(bad.message().find("line 1"), std::string::npos) << bad;
  EXPECT_EQ((*store)->Authorize("Bearer " + kKeyA), "a");
  // No keys at start is a mistake; missing files too.
  EXPECT_FALSE(ApiKeyStore::Open(WriteFile("empty", "# none\n")).ok());
  EXPECT_EQ(ApiKeyStore::Open(path + ".missing").status().code(),
            absl::StatusCode::kNotFound);
}

// The median time of `runs` batches of `calls` calls of each of `fns`,
// measured in turns (batch i of every fn, in a rotating order) so that the
// machine's drift and noise fall on all of them alike.
std::vector<double> MedianNanos(const std::vector<std::function<void()>>& fns,
                                int runs, int calls) {
  std::vector<std::vector<double>> times(fns.size());
  for (int r = 0; r < runs; ++r) {
    for (size_t k = 0; k < fns.size(); ++k) {
      const size_t f = (k + r) % fns.size();
      const auto start = std::chrono::steady_clock::now();
      for (int c = 0; c < calls; ++c) fns[f]();
      times[f].push_back(std::chrono::duration<double, std::nano>(
                             std::chrono::steady_clock::now() - start)
                             .count());
    }
  }
  std::vector<double> medians;
  for (auto& t : times) {
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    medians.push_back(t[t.size() / 2]);
  }
  return medians;
}

// Medians within a factor of 1.5 of each other: far beyond what noise does
// to medians of hundreds of batches, far below what an early exit does
// (there the fast case is tens of times faster).
void ExpectIndistinguishable(const std::vector<double>& medians,
                             const std::vector<std::string>& names) {
  const double lo = *std::min_element(medians.begin(), medians.end());
  const double hi = *std::max_element(medians.begin(), medians.end());
  std::string all;
  for (size_t i = 0; i < medians.size(); ++i) {
    absl::StrAppend(&all, names[i], "=", medians[i], "ns ");
  }
  std::printf("medians: %s\n", all.c_str());
  EXPECT_LT(hi / lo, 1.5) << all;
}

TEST(ApiKeysTimingTest, CompareTakesTheSameTimeWhereverBuffersDiffer) {
  const std::string a(256 << 10, 'x');
  std::string first = a, last = a;
  first.front() = 'y';
  last.back() = 'y';
  volatile bool sink = false;
  const std::vector<double> medians =
      MedianNanos({[&] { sink = ConstantTimeEqual(a, a); },
                   [&] { sink = ConstantTimeEqual(a, first); },
                   [&] { sink = ConstantTimeEqual(a, last); }},
                  /*runs=*/301, /*calls=*/2);
  ExpectIndistinguishable(medians, {"equal", "first differs", "last differs"});
}

TEST(ApiKeysTimingTest, RightAndWrongKeysTakeTheSameTime) {
  // Long keys: a compare that stopped at the first wrong byte would make
  // the key right but for its last byte many times slower than the one
  // wrong from its first.
  std::string text;
  std::vector<std::string> keys;
  for (int i = 0; i < 64; ++i) {
    keys.push_back(absl::StrCat(i, "-", std::string(kMaxApiKeyBytes - 8, 'k')));
    absl::StrAppend(&text, keys.back(), " t", i, "\n");
  }
  auto parsed = ApiKeys::Parse(text, "keys");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const std::string& right = keys[37];
  std::string near = right, far = right;
  near.back() = 'z';
  far.front() = 'z';
  ASSERT_EQ(parsed->TenantOf(right), "t37");
  ASSERT_EQ(parsed->TenantOf(near), std::nullopt);
  volatile bool sink = false;
  const std::vector<double> medians =
      MedianNanos({[&] { sink = parsed->TenantOf(right).has_value(); },
                   [&] { sink = parsed->TenantOf(near).has_value(); },
                   [&] { sink = parsed->TenantOf(far).has_value(); }},
                  /*runs=*/401, /*calls=*/4);
  ExpectIndistinguishable(medians, {"right", "wrong last byte", "wrong first"});
}

}  // namespace
}  // namespace seqboat
