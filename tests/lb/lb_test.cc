// Three seqboat_server replicas behind Debian's nginx (grpc_pass, balancing
// each HTTP/2 stream), driven by the seqboat_load client.
//
// The kill test's scale comes from the environment, so that the same test runs
// larger outside CI (tests/lb/kill_at_scale.sh): SEQBOAT_LB_KILL_STREAMS
// (default 300), SEQBOAT_LB_KILL_CONCURRENCY (30), SEQBOAT_LB_KILL_OUTPUT_LEN
// (256 tokens per stream).
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/lb/child_process.h"
#include "tests/lb/cluster.h"

namespace seqboat {
namespace {

constexpr int kReplicas = 3;
constexpr int kRequests = 60;
constexpr int kConcurrency = 6;
constexpr char kOkCalls[] =
    "seqboat_requests_total{code=\"OK\",frontend=\"grpc\"}";

int EnvInt(const char* name, int fallback) {
  const char* value = std::getenv(name);
  int n;
  return value != nullptr && absl::SimpleAtoi(value, &n) && n > 0 ? n
                                                                  : fallback;
}

std::string MakeTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr ? base : "/tmp", "/", name, "_XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

// (conversation, turn) of a chat request id "chat-SEED-cC-tT"; (-1, -1) if
// it is none.
std::pair<int, int> ConversationTurn(const std::string& id) {
  const size_t c = id.find("-c"), t = id.find("-t", c);
  int conversation = -1, turn = -1;
  if (c == std::string::npos || t == std::string::npos ||
      !absl::SimpleAtoi(id.substr(c + 2, t - c - 2), &conversation) ||
      !absl::SimpleAtoi(id.substr(t + 2), &turn)) {
    return {-1, -1};
  }
  return {conversation, turn};
}

// The median of `v` (0 when empty).
double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

class LbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("lb");
    ASSERT_FALSE(dir_.empty());
    std::vector<std::string>& upstreams = upstreams_;
    for (int i = 0; i < kReplicas; ++i) {
      // One CPU thread each: three replicas share two cores with the client.
      auto replica = StartReplica(dir_, i, ReplicaFlags(i));
      ASSERT_TRUE(replica.ok()) << replica.status();
      upstreams.push_back(replica->grpc_address);
      replicas_.push_back(*std::move(replica));
    }
    auto nginx = StartNginx(dir_, upstreams, &lb_port_);
    ASSERT_TRUE(nginx.ok()) << nginx.status();
    nginx_ = *std::move(nginx);
  }

  void TearDown() override { StopCluster(nginx_.get(), replicas_); }

  std::unique_ptr<ChildProcess> StartLoad(int requests, int concurrency,
                                          int output_len,
                                          const std::string& result) {
    auto load = ChildProcess::Start(
        {"clients/load/seqboat_load",
         absl::StrCat("--target=127.0.0.1:", lb_port_),
         absl::StrCat("--concurrency=", concurrency),
         absl::StrCat("--num_requests=", requests), "--input_len=16",
         absl::StrCat("--output_len=", output_len), "--seed=7",
         "--request_timeout_s=120", "--progress=false", "--save_requests",
         "--result_json=" + result},
        dir_ + "/load.stdout", dir_ + "/load.stderr");
    EXPECT_TRUE(load.ok()) << load.status();
    return load.ok() ? *std::move(load) : nullptr;
  }

  nlohmann::json FinishLoad(ChildProcess& load, const std::string& result,
                            absl::Duration timeout = absl::Seconds(240)) {
    std::optional<int> code = load.WaitForExit(timeout);
    EXPECT_EQ(code, 0) << ReadFileOrEmpty(load.stderr_path());
    return nlohmann::json::parse(ReadFileOrEmpty(result), nullptr, false);
  }

  std::string Metrics(const Replica& r) {
    auto got = HttpGet(r, "/metrics");
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->second : "";
  }

  double Sample(const Replica& r, const std::string& series) {
    return SampleValue(Metrics(r), series).value_or(-1);
  }

  // One CPU thread each: three replicas share two cores with the client.
  // Each has its own snapshot directory, as each pod its own volume.
  std::vector<std::string> ReplicaFlags(int i) const {
    return {"--max_slots=8", "--cpu_threads=1",
            absl::StrCat("--prefix_cache_dir=", dir_, "/snapshots", i),
            "--prefix_cache_disk_bytes=268435456"};
  }

  // Which replica accepted each conversation's requests ("chat-S-c<c>-t<t>")
  // in its log past `seen[i]` lines of accepted ids (advanced to the end).
  std::map<int, std::set<int>> OwnersSince(
      std::vector<size_t>& seen, const std::vector<std::string>& logs) {
    std::map<int, std::set<int>> owners;
    for (size_t i = 0; i < logs.size(); ++i) {
      const std::vector<std::string> ids =
          AcceptedRequestIds(ReadFileOrEmpty(logs[i]));
      for (size_t j = seen[i]; j < ids.size(); ++j) {
        const size_t c = ids[j].find("-c"), t = ids[j].find("-t", c);
        int conversation;
        if (c != std::string::npos && t != std::string::npos &&
            absl::SimpleAtoi(ids[j].substr(c + 2, t - c - 2), &conversation)) {
          owners[conversation].insert(static_cast<int>(i));
        }
      }
      seen[i] = ids.size();
    }
    return owners;
  }

  std::unique_ptr<ChildProcess> StartChat(int port, uint64_t seed,
                                          bool session_ids,
                                          const std::string& result,
                                          int turns) {
    auto load = ChildProcess::Start(
        {"clients/load/seqboat_load", absl::StrCat("--target=127.0.0.1:", port),
         "--workload=chat", "--concurrency=8", "--chat_conversations=16",
         absl::StrCat("--chat_turns=", turns), "--chat_history_len=1024",
         "--chat_user_len=16", "--output_len=16", absl::StrCat("--seed=", seed),
         absl::StrCat("--chat_session_ids=", session_ids ? "true" : "false"),
         "--request_timeout_s=120", "--progress=false", "--save_requests",
         "--result_json=" + result},
        result + ".stdout", result + ".stderr");
    EXPECT_TRUE(load.ok()) << load.status();
    return load.ok() ? *std::move(load) : nullptr;
  }

  // The chat workload (16 conversations of `turns`, a 1024-token history, 16
  // tokens a user message and an answer) through the balancer on `port`;
  // the result JSON's per-turn summaries (and, with `full`, all of it).
  nlohmann::json RunChat(int port, uint64_t seed, bool session_ids,
                         const std::string& result, int turns = 4,
                         nlohmann::json* full = nullptr) {
    std::unique_ptr<ChildProcess> load =
        StartChat(port, seed, session_ids, result, turns);
    if (load == nullptr) return nlohmann::json();
    nlohmann::json out = FinishLoad(*load, result, absl::Seconds(400));
    if (out.is_discarded()) return nlohmann::json();
    if (full != nullptr) *full = out;
    // Requests that resumed from no snapshot past the first turn, for the
    // log of a failure.
    for (const auto& r : out["requests"]) {
      if (r["cached_prompt_tokens"].get<int64_t>() == 0) {
        std::cout << result << ": " << r["request_id"].get<std::string>()
                  << " cached nothing" << std::endl;
      }
    }
    return out["turns"];
  }

  std::string dir_;
  std::vector<std::string> upstreams_;
  std::vector<Replica> replicas_;
  int lb_port_ = 0;
  std::unique_ptr<ChildProcess> nginx_;
};

TEST_F(LbTest, EveryReplicaServesAndTokenCountsMatchTheirMetrics) {
  const std::string result = dir_ + "/result.json";
  auto load = StartLoad(kRequests, kConcurrency, /*output_len=*/32, result);
  ASSERT_NE(load, nullptr);
  const nlohmann::json out = FinishLoad(*load, result);
  ASSERT_FALSE(out.is_discarded());
  EXPECT_EQ(out["completed"], kRequests);
  EXPECT_EQ(out["failed"], 0);
  const int64_t client_tokens = out["total_output_tokens"];
  EXPECT_EQ(client_tokens, kRequests * 32);
  int64_t received = 0;
  for (const auto& r : out["requests"])
    received += r["received_tokens"].get<int64_t>();
  EXPECT_EQ(received, client_tokens);

  double ok_calls = 0, generated = 0;
  for (int i = 0; i < kReplicas; ++i) {
    const std::string text = Metrics(replicas_[i]);
    const double ok = SampleValue(text, kOkCalls).value_or(0);
    // Per-stream balancing spreads 60 streams over all three.
    EXPECT_GT(ok, 0) << "replica " << i << " served no stream";
    ok_calls += ok;
    generated +=
        SampleValue(text, "seqboat_generation_tokens_total{frontend=\"grpc\"}")
            .value_or(-1);
  }
  EXPECT_EQ(ok_calls, kRequests);
  EXPECT_EQ(generated, static_cast<double>(client_tokens));
}

// A few hundred streams over the three; a third of the way through, the
// busiest replica is SIGKILLed. The streams it held fail; no other does, each
// of the others gets every token, and the two survivors end idle.
// The same replicas behind two balancers: the per-stream round robin above,
// and the deployed config's consistent hash of the conversation key
// (deploy/k8s/nginx.conf). With the key, each conversation's turns land on
// the replica that holds its last turn's snapshot: every turn after the
// first resumes from it (at least 95 % of its prompt from the cache).
// Round robin in the same run shows what affinity is worth (printed).
TEST_F(LbTest, SessionAffinityServesEveryNextTurnFromItsSnapshot) {
  const std::string prefix = dir_ + "/affinity";
  ASSERT_EQ(mkdir(prefix.c_str(), 0755), 0);
  int hashed_port = 0;
  auto hashed = StartNginx(prefix, upstreams_, &hashed_port,
                           "hash $http_x_session_id consistent;");
  ASSERT_TRUE(hashed.ok()) << hashed.status();
  // Different seeds: the second run's histories are not the first's.
  const nlohmann::json rr =
      RunChat(lb_port_, 11, /*session_ids=*/false, dir_ + "/chat_rr.json");
  const nlohmann::json affine =
      RunChat(hashed_port, 12, /*session_ids=*/true, dir_ + "/chat_hash.json");
  (*hashed)->Signal(SIGQUIT);
  (*hashed)->WaitForExit(absl::Seconds(10));
  ASSERT_EQ(rr.size(), 4u);
  ASSERT_EQ(affine.size(), 4u);
  for (int turn = 0; turn < 4; ++turn) {
    const nlohmann::json& a = affine[turn];
    const nlohmann::json& r = rr[turn];
    EXPECT_EQ(a["completed"], 16);
    EXPECT_EQ(r["completed"], 16);
    std::cout << "turn " << turn << ": cached/prompt affinity "
              << a["cached_fraction"].get<double>() << " round robin "
              << r["cached_fraction"].get<double>() << "; TTFT p50 affinity "
              << a["median_ttft_ms"].get<double>() << " ms, round robin "
              << r["median_ttft_ms"].get<double>() << " ms" << std::endl;
    if (turn > 0) {
      EXPECT_GE(a["cached_fraction"].get<double>(), 0.95) << turn;
      EXPECT_GT(a["min_cached_prompt_tokens"].get<int64_t>(), 0) << turn;
    }
  }
}

// Conversations keyed through the hashing balancer; one replica is stopped
// (SIGTERM: its drain writes its snapshots to its directory) and the same
// conversations run again: only the stopped replica's move, to the next
// replica on the ring. It comes back on its port over its directory and the
// conversations run a third time through a fresh balancer: its own return to
// it and resume from the snapshots it read back from disk.
TEST_F(LbTest, ALostReplicaMovesOnlyItsConversationsAndResumesThemFromDisk) {
  const std::string hash = "hash $http_x_session_id consistent;";
  const std::string prefix1 = dir_ + "/hash1", prefix2 = dir_ + "/hash2";
  ASSERT_EQ(mkdir(prefix1.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(prefix2.c_str(), 0755), 0);
  int port1 = 0, port2 = 0;
  auto nginx1 = StartNginx(prefix1, upstreams_, &port1, hash);
  ASSERT_TRUE(nginx1.ok()) << nginx1.status();
  std::vector<std::string> logs;
  for (int i = 0; i < kReplicas; ++i) {
    logs.push_back(absl::StrCat(dir_, "/replica", i, ".stderr"));
  }
  std::vector<size_t> seen(kReplicas, 0);

  const nlohmann::json first =
      RunChat(port1, 21, true, dir_ + "/chat1.json", /*turns=*/2);
  ASSERT_EQ(first.size(), 2u);
  const std::map<int, std::set<int>> before = OwnersSince(seen, logs);
  ASSERT_EQ(before.size(), 16u);
  for (const auto& [c, owners] : before) ASSERT_EQ(owners.size(), 1u) << c;
  const int lost = *before.at(0).begin();
  int lost_conversations = 0;
  for (const auto& [c, owners] : before) {
    lost_conversations += static_cast<int>(owners.count(lost));
  }

  replicas_[lost].process->Signal(SIGTERM);
  ASSERT_EQ(replicas_[lost].process->WaitForExit(absl::Seconds(60)), 0);
  const nlohmann::json second =
      RunChat(port1, 21, true, dir_ + "/chat2.json", /*turns=*/3);
  ASSERT_EQ(second.size(), 3u);
  for (const auto& t : second) EXPECT_EQ(t["completed"], 16);
  const std::map<int, std::set<int>> during = OwnersSince(seen, logs);
  for (const auto& [c, owners] : before) {
    const int owner = *owners.begin();
    ASSERT_EQ(during.count(c), 1u) << c;
    if (owner == lost) {
      EXPECT_EQ(during.at(c).count(lost), 0u) << c;
    } else {
      EXPECT_EQ(during.at(c), std::set<int>{owner}) << "conversation " << c;
    }
  }
  (*nginx1)->Signal(SIGQUIT);
  (*nginx1)->WaitForExit(absl::Seconds(10));

  // Back on its port (the balancer's address for it), over its directory.
  std::vector<std::string> flags = ReplicaFlags(lost);
  const std::string& address = upstreams_[lost];
  flags.push_back("--port=" + address.substr(address.rfind(':') + 1));
  auto back = StartReplica(dir_, kReplicas + lost, flags);
  ASSERT_TRUE(back.ok()) << back.status();
  replicas_[lost] = *std::move(back);
  EXPECT_GT(Sample(replicas_[lost], "seqboat_prefix_cache_disk_files"), 0);
  auto nginx2 = StartNginx(prefix2, upstreams_, &port2, hash);
  ASSERT_TRUE(nginx2.ok()) << nginx2.status();
  const nlohmann::json third =
      RunChat(port2, 21, true, dir_ + "/chat3.json", /*turns=*/3);
  (*nginx2)->Signal(SIGQUIT);
  (*nginx2)->WaitForExit(absl::Seconds(10));
  ASSERT_EQ(third.size(), 3u);
  // Every turn, the repeated first one included, resumes from a snapshot:
  // the lost replica's conversations from the ones it read back from disk.
  const double disk_hits =
      Sample(replicas_[lost], "seqboat_prefix_cache_disk_hits_total");
  EXPECT_GE(disk_hits, lost_conversations);
  for (size_t t = 0; t < 3; ++t) {
    std::cout << "turn " << t << ": cached/prompt before "
              << (t < first.size() ? first[t]["cached_fraction"].get<double>()
                                   : -1.0)
              << ", replica " << lost << " down "
              << second[t]["cached_fraction"].get<double>() << ", back "
              << third[t]["cached_fraction"].get<double>() << "; TTFT p50 down "
              << second[t]["median_ttft_ms"].get<double>() << " ms, back "
              << third[t]["median_ttft_ms"].get<double>() << " ms" << std::endl;
    EXPECT_EQ(third[t]["completed"], 16);
    EXPECT_GE(third[t]["cached_fraction"].get<double>(), 0.95) << t;
  }
  std::cout << "replica " << lost << " owned " << lost_conversations
            << " of 16 conversations; disk hits after its restart " << disk_hits
            << std::endl;
}

// Replicas that write their snapshots through to disk and ask each other for
// the ones they lack. Mid-run, the replica of conversation 0 is SIGKILLed:
// only its conversations move (the others keep resuming from their own
// replica's snapshots); their next turns are served on the next replica of
// the ring, which finds no peer holding them (the owner is dead) and
// prefills them cold. The replica comes back on its port over its directory
// and serves its conversations from disk. A fourth replica then joins: the
// conversations the ring moves to it are fetched from their old replicas.
// Prints each path's TTFT (the first turn, repeated: a 1,024-token history).
TEST_F(LbTest, AKilledReplicasConversationsComeBackFromDiskAndPeers) {
  const std::string hash = "hash $http_x_session_id consistent;";
  auto flags = [&](int i, const std::vector<std::string>& peers) {
    std::vector<std::string> f = ReplicaFlags(i);
    const std::string& address = upstreams_[i];
    f.push_back("--port=" + address.substr(address.rfind(':') + 1));
    f.push_back("--prefix_cache_disk_write_through");
    f.push_back("--prefix_cache_peer_min_tokens=64");
    f.push_back("--prefix_cache_peer_deadline_ms=5000");
    std::string list;
    for (const std::string& p : peers) list += (list.empty() ? "" : ",") + p;
    f.push_back("--prefix_cache_peers=" + list);
    return f;
  };
  auto others = [&](int i) {
    std::vector<std::string> o;
    for (int j = 0; j < kReplicas; ++j) {
      if (j != i) o.push_back(upstreams_[j]);
    }
    return o;
  };
  std::vector<std::string> logs;
  for (int i = 0; i < kReplicas; ++i) {
    replicas_[i].process->Signal(SIGTERM);
    ASSERT_EQ(replicas_[i].process->WaitForExit(absl::Seconds(60)), 0);
  }
  for (int i = 0; i < kReplicas; ++i) {
    auto r = StartReplica(dir_, 10 + i, flags(i, others(i)));
    ASSERT_TRUE(r.ok()) << r.status();
    replicas_[i] = *std::move(r);
    logs.push_back(absl::StrCat(dir_, "/replica", 10 + i, ".stderr"));
  }
  std::vector<std::string> prefixes;
  for (int k = 0; k < 3; ++k) {
    prefixes.push_back(absl::StrCat(dir_, "/kill", k));
    ASSERT_EQ(mkdir(prefixes.back().c_str(), 0755), 0);
  }
  int port = 0;
  auto nginx = StartNginx(prefixes[0], upstreams_, &port, hash);
  ASSERT_TRUE(nginx.ok()) << nginx.status();
  std::vector<size_t> seen(kReplicas, 0);
  RunChat(port, 31, true, dir_ + "/kill_a.json", /*turns=*/2);
  const std::map<int, std::set<int>> owners = OwnersSince(seen, logs);
  ASSERT_EQ(owners.size(), 16u);
  const int lost = *owners.at(0).begin();
  std::set<int> moved;
  for (const auto& [c, o] : owners) {
    if (o.count(lost) > 0) moved.insert(c);
  }

  // The same conversations again, 4 turns; the kill lands once the lost
  // replica has taken a few of them.
  const std::string during_json = dir_ + "/kill_b.json";
  std::unique_ptr<ChildProcess> load =
      StartChat(port, 31, true, during_json, 4);
  ASSERT_NE(load, nullptr);
  const size_t had = AcceptedRequestIds(ReadFileOrEmpty(logs[lost])).size();
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (AcceptedRequestIds(ReadFileOrEmpty(logs[lost])).size() <
             had + moved.size() &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  replicas_[lost].process->Signal(SIGKILL);
  replicas_[lost].process->WaitForExit(absl::Seconds(30));
  load->WaitForExit(absl::Seconds(400));
  const nlohmann::json during =
      nlohmann::json::parse(ReadFileOrEmpty(during_json), nullptr, false);
  ASSERT_FALSE(during.is_discarded());
  const std::map<int, std::set<int>> after_kill = OwnersSince(seen, logs);
  for (const auto& r : during["requests"]) {
    const auto [c, t] = ConversationTurn(r["request_id"]);
    if (moved.count(c) > 0) continue;
    // Every other conversation stays on its replica and on its snapshots.
    EXPECT_EQ(r["status"], "OK") << r["request_id"];
    EXPECT_GE(r["cached_prompt_tokens"].get<double>(),
              0.95 * r["prompt_tokens"].get<double>())
        << r["request_id"];
    EXPECT_EQ(after_kill.at(c), owners.at(c)) << c;
  }

  // Their next run: the lost ones on the next replica, prefilled cold.
  nlohmann::json cold;
  RunChat(port, 31, true, dir_ + "/kill_c.json", 4, &cold);
  (*nginx)->Signal(SIGQUIT);
  (*nginx)->WaitForExit(absl::Seconds(10));
  std::vector<double> cold_ttft, disk_ttft, peer_ttft;
  for (const auto& r : cold["requests"]) {
    const auto [c, t] = ConversationTurn(r["request_id"]);
    EXPECT_EQ(r["status"], "OK") << r["request_id"];
    const double cached = r["cached_prompt_tokens"].get<double>();
    const double prompt = r["prompt_tokens"].get<double>();
    if (moved.count(c) > 0) {
      // Cold unless the kill's own run already moved it (nginx passes a
      // key whose replica is down to the next one).
      if (t == 0 && cached < 0.5 * prompt) {
        cold_ttft.push_back(r["ttft_s"].get<double>() * 1e3);
      }
    } else {
      EXPECT_GE(cached, 0.95 * prompt) << r["request_id"];
    }
  }

  // Back on its port over its directory: its conversations from disk.
  auto back = StartReplica(dir_, 20 + lost, flags(lost, others(lost)));
  ASSERT_TRUE(back.ok()) << back.status();
  replicas_[lost] = *std::move(back);
  nginx = StartNginx(prefixes[1], upstreams_, &port, hash);
  ASSERT_TRUE(nginx.ok()) << nginx.status();
  nlohmann::json restored;
  RunChat(port, 31, true, dir_ + "/kill_d.json", 4, &restored);
  (*nginx)->Signal(SIGQUIT);
  (*nginx)->WaitForExit(absl::Seconds(10));
  for (const auto& r : restored["requests"]) {
    const auto [c, t] = ConversationTurn(r["request_id"]);
    EXPECT_EQ(r["status"], "OK") << r["request_id"];
    EXPECT_GE(r["cached_prompt_tokens"].get<double>(),
              0.95 * r["prompt_tokens"].get<double>())
        << r["request_id"];
    if (moved.count(c) > 0 && t == 0) {
      disk_ttft.push_back(r["ttft_s"].get<double>() * 1e3);
    }
  }
  const double disk_hits =
      Sample(replicas_[lost], "seqboat_prefix_cache_disk_hits_total");
  EXPECT_GE(disk_hits, static_cast<double>(moved.size()));

  // A fourth replica joins: the conversations the ring gives it come from
  // their old replicas.
  std::vector<std::string> all = upstreams_;
  auto joined = StartReplica(dir_, 30, [&] {
    std::vector<std::string> f = ReplicaFlags(kReplicas);
    f.push_back("--prefix_cache_peer_min_tokens=64");
    f.push_back("--prefix_cache_peer_deadline_ms=5000");
    // Every conversation's first turn may arrive at once: past the default
    // of 4 fetches in flight the rest would prefill cold, as designed, and
    // how many overlap depends on the machine's load.
    f.push_back("--prefix_cache_peer_max_fetches=16");
    std::string list;
    for (const std::string& p : upstreams_)
      list += (list.empty() ? "" : ",") + p;
    f.push_back("--prefix_cache_peers=" + list);
    return f;
  }());
  ASSERT_TRUE(joined.ok()) << joined.status();
  // Weighted, so that the ring gives it some of the 16 conversations
  // whatever its port: at weight 1 it gets none about one run in a hundred.
  all.push_back(joined->grpc_address + " weight=4");
  replicas_.push_back(*std::move(joined));
  const std::string joined_log = absl::StrCat(dir_, "/replica30.stderr");
  nginx = StartNginx(prefixes[2], all, &port, hash);
  ASSERT_TRUE(nginx.ok()) << nginx.status();
  nlohmann::json scaled;
  RunChat(port, 31, true, dir_ + "/kill_e.json", 4, &scaled);
  (*nginx)->Signal(SIGQUIT);
  (*nginx)->WaitForExit(absl::Seconds(10));
  std::set<std::string> on_joined;
  for (const std::string& id :
       AcceptedRequestIds(ReadFileOrEmpty(joined_log))) {
    on_joined.insert(id);
  }
  int joined_conversations = 0;
  for (const auto& r : scaled["requests"]) {
    const auto [c, t] = ConversationTurn(r["request_id"]);
    EXPECT_EQ(r["status"], "OK") << r["request_id"];
    EXPECT_GE(r["cached_prompt_tokens"].get<double>(),
              0.95 * r["prompt_tokens"].get<double>())
        << r["request_id"];
    if (t == 0 && on_joined.count(r["request_id"]) > 0) {
      ++joined_conversations;
      peer_ttft.push_back(r["ttft_s"].get<double>() * 1e3);
    }
  }
  const Replica& w = replicas_.back();
  EXPECT_GT(joined_conversations, 0);
  EXPECT_GE(Sample(w, "seqboat_prefix_cache_peer_hits_total"),
            joined_conversations);
  std::cout << "replica " << lost << " killed with " << moved.size()
            << " of 16 conversations; first turn again (1,024-token history)"
            << " TTFT p50: cold on the next replica " << Median(cold_ttft)
            << " ms (" << cold_ttft.size() << "), from its disk after the"
            << " restart " << Median(disk_ttft) << " ms (" << disk_ttft.size()
            << "), fetched from a peer by a joining replica "
            << Median(peer_ttft) << " ms (" << peer_ttft.size()
            << "); disk hits " << disk_hits << ", peer hits "
            << Sample(w, "seqboat_prefix_cache_peer_hits_total")
            << ", peer bytes "
            << Sample(w, "seqboat_prefix_cache_peer_received_bytes_total")
            << std::endl;
}

TEST_F(LbTest, KillingAReplicaMidLoadFailsOnlyTheStreamsOnIt) {
  const int streams = EnvInt("SEQBOAT_LB_KILL_STREAMS", 300);
  const int concurrency = EnvInt("SEQBOAT_LB_KILL_CONCURRENCY", 30);
  const int output_len = EnvInt("SEQBOAT_LB_KILL_OUTPUT_LEN", 256);
  const std::string result = dir_ + "/result.json";
  const absl::Time start = absl::Now();
  auto load = StartLoad(streams, concurrency, output_len, result);
  ASSERT_NE(load, nullptr);

  // Wait (bounded) until a third of the streams are done and a replica holds
  // half a replica's share of the streams in flight or more (they start and
  // end in waves), or, from half of them done, any; then kill that replica.
  const int busy_enough = std::max(1, concurrency / kReplicas / 2);
  auto ready = [&](double done, double busy) {
    return done * 3 >= streams &&
           (busy >= busy_enough || (done * 2 >= streams && busy >= 1));
  };
  double done = 0, victim_busy = 0;
  int v = 0;
  for (const absl::Time end = absl::Now() + absl::Seconds(120);
       absl::Now() < end && load->Running();
       absl::SleepFor(absl::Milliseconds(20))) {
    done = 0;
    victim_busy = 0;
    for (int i = 0; i < kReplicas; ++i) {
      const std::string text = Metrics(replicas_[i]);
      done += SampleValue(text, kOkCalls).value_or(0);
      const double busy =
          SampleValue(text, "seqboat_num_requests_running").value_or(0) +
          SampleValue(text, "seqboat_num_requests_waiting").value_or(0);
      if (busy > victim_busy) {
        victim_busy = busy;
        v = i;
      }
    }
    if (ready(done, victim_busy)) break;
  }
  ASSERT_TRUE(ready(done, victim_busy))
      << "the load ended or stalled before the kill: " << done << " done, "
      << victim_busy << " on the busiest replica";
  Replica& victim = replicas_[v];
  std::vector<const Replica*> survivors;
  for (int i = 0; i < kReplicas; ++i) {
    if (i != v) survivors.push_back(&replicas_[i]);
  }
  victim.process->Signal(SIGKILL);
  ASSERT_TRUE(victim.process->WaitForExit(absl::Seconds(10)).has_value() ||
              !victim.process->Running());
  const absl::Duration kill_at = absl::Now() - start;

  const nlohmann::json out = FinishLoad(*load, result, absl::Seconds(600));
  ASSERT_FALSE(out.is_discarded());
  ASSERT_EQ(out["requests"].size(), static_cast<size_t>(streams));

  // Where each stream went: the survivors log every stream they accept. Any
  // other stream went to the victim (whose log may lack a stream nginx handed
  // it just before the kill).
  std::set<std::string> on_victim_log, on_survivors;
  for (const std::string& id :
       AcceptedRequestIds(ReadFileOrEmpty(victim.process->stderr_path()))) {
    on_victim_log.insert(id);
  }
  for (const Replica* r : survivors) {
    for (const std::string& id :
         AcceptedRequestIds(ReadFileOrEmpty(r->process->stderr_path()))) {
      EXPECT_TRUE(on_survivors.insert(id).second) << id << " ran twice";
    }
  }
  int failed = 0, on_victim = 0, completed_on_victim = 0;
  for (const auto& r : out["requests"]) {
    const std::string id = r["request_id"];
    const bool ok = r["status"] == "OK";
    failed += !ok;
    if (on_survivors.count(id)) {
      EXPECT_TRUE(ok) << id << " failed with " << r["status"]
                      << " on a surviving replica";
    } else {
      ++on_victim;
      if (ok) {
        ++completed_on_victim;
        EXPECT_TRUE(on_victim_log.count(id))
            << id << " completed, but no replica logged accepting it";
      }
    }
    if (ok) {
      EXPECT_EQ(r["output_tokens"], output_len) << id;
      EXPECT_EQ(r["received_tokens"], output_len) << id;
    }
  }
  std::cout << "lb kill: " << streams << " streams (concurrency " << concurrency
            << ", " << output_len << " tokens each), " << failed << " failed, "
            << on_victim << " routed to the killed replica ("
            << completed_on_victim << " completed before the kill; "
            << victim_busy
            << " running or queued there at the last look before it; replica "
            << v << "), " << on_survivors.size()
            << " on the survivors, all complete; kill at "
            << absl::FormatDuration(kill_at) << ", load done at "
            << absl::FormatDuration(absl::Now() - start) << std::endl;
  EXPECT_GE(failed, 1) << "killing a serving replica failed no stream";
  // At most what the client had in flight, all of it on the victim.
  EXPECT_LE(failed, concurrency);
  EXPECT_EQ(out["failed"], failed);
  EXPECT_EQ(out["completed"], streams - failed);

  // The survivors served exactly the streams they logged, to the last token,
  // and hold nothing now: no request running or queued, every slot free.
  double survivors_ok = 0, survivors_tokens = 0;
  for (const Replica* r : survivors) {
    for (const char* series :
         {"seqboat_num_requests_running", "seqboat_num_requests_waiting",
          "seqboat_state_slots_used"}) {
      double value = -1;
      for (const absl::Time end = absl::Now() + absl::Seconds(10);
           absl::Now() < end; absl::SleepFor(absl::Milliseconds(50))) {
        if ((value = Sample(*r, series)) == 0) break;
      }
      EXPECT_EQ(value, 0) << series << " on the survivor at "
                          << r->grpc_address;
    }
    survivors_ok += Sample(*r, kOkCalls);
    survivors_tokens +=
        Sample(*r, "seqboat_generation_tokens_total{frontend=\"grpc\"}");
  }
  EXPECT_EQ(survivors_ok, static_cast<double>(on_survivors.size()));
  EXPECT_EQ(survivors_tokens,
            static_cast<double>(on_survivors.size()) * output_len);
}

}  // namespace
}  // namespace seqboat
