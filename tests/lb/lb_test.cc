// Three seqboat_server replicas behind Debian's nginx (grpc_pass, balancing
// each HTTP/2 stream), driven by the seqboat_load client.
#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

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

std::string MakeTempDir(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl =
      absl::StrCat(base != nullptr ? base : "/tmp", "/", name, "_XXXXXX");
  if (mkdtemp(tmpl.data()) == nullptr) return "";
  return tmpl;
}

class LbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("lb");
    ASSERT_FALSE(dir_.empty());
    std::vector<std::string> upstreams;
    for (int i = 0; i < kReplicas; ++i) {
      // One CPU thread each: three replicas share two cores with the client.
      auto replica =
          StartReplica(dir_, i, {"--max_slots=4", "--cpu_threads=1"});
      ASSERT_TRUE(replica.ok()) << replica.status();
      upstreams.push_back(replica->grpc_address);
      replicas_.push_back(*std::move(replica));
    }
    auto nginx = StartNginx(dir_, upstreams, &lb_port_);
    ASSERT_TRUE(nginx.ok()) << nginx.status();
    nginx_ = *std::move(nginx);
  }

  void TearDown() override {
    if (nginx_ != nullptr) {
      nginx_->Signal(SIGQUIT);
      nginx_->WaitForExit(absl::Seconds(10));
    }
    for (Replica& r : replicas_) {
      r.process->Signal(SIGTERM);
      r.process->WaitForExit(absl::Seconds(30));
    }
  }

  std::unique_ptr<ChildProcess> StartLoad(int output_len,
                                          const std::string& result) {
    auto load = ChildProcess::Start(
        {"clients/load/seqboat_load",
         absl::StrCat("--target=127.0.0.1:", lb_port_),
         absl::StrCat("--concurrency=", kConcurrency),
         absl::StrCat("--num_requests=", kRequests), "--input_len=16",
         absl::StrCat("--output_len=", output_len), "--seed=7",
         "--request_timeout_s=120", "--progress=false", "--save_requests",
         "--result_json=" + result},
        dir_ + "/load.stdout", dir_ + "/load.stderr");
    EXPECT_TRUE(load.ok()) << load.status();
    return load.ok() ? *std::move(load) : nullptr;
  }

  nlohmann::json FinishLoad(ChildProcess& load, const std::string& result) {
    std::optional<int> code = load.WaitForExit(absl::Seconds(240));
    EXPECT_EQ(code, 0) << ReadFileOrEmpty(load.stderr_path());
    return nlohmann::json::parse(ReadFileOrEmpty(result), nullptr, false);
  }

  std::string Metrics(const Replica& r) {
    auto got = HttpGet(r, "/metrics");
    EXPECT_TRUE(got.ok()) << got.status();
    return got.ok() ? got->second : "";
  }

  std::string dir_;
  std::vector<Replica> replicas_;
  int lb_port_ = 0;
  std::unique_ptr<ChildProcess> nginx_;
};

TEST_F(LbTest, EveryReplicaServesAndTokenCountsMatchTheirMetrics) {
  const std::string result = dir_ + "/result.json";
  auto load = StartLoad(/*output_len=*/32, result);
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
    const double ok =
        SampleValue(text,
                    "seqboat_requests_total{code=\"OK\",frontend=\"grpc\"}")
            .value_or(0);
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

TEST_F(LbTest, KillingAReplicaFailsOnlyTheStreamsItServed) {
  const std::string result = dir_ + "/result.json";
  auto load = StartLoad(/*output_len=*/256, result);
  ASSERT_NE(load, nullptr);
  Replica& victim = replicas_[0];
  // Kill it while it is serving streams (polled, bounded).
  bool serving = false;
  for (const absl::Time end = absl::Now() + absl::Seconds(60);
       !serving && absl::Now() < end && load->Running();) {
    serving = SampleValue(Metrics(victim), "seqboat_num_requests_running")
                  .value_or(0) >= 1;
    if (!serving) absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(serving) << "the victim never had a running stream";
  victim.process->Signal(SIGKILL);
  ASSERT_TRUE(victim.process->WaitForExit(absl::Seconds(10)).has_value() ||
              !victim.process->Running());

  const nlohmann::json out = FinishLoad(*load, result);
  ASSERT_FALSE(out.is_discarded());
  ASSERT_EQ(out["requests"].size(), static_cast<size_t>(kRequests));

  std::set<std::string> on_victim, on_survivors;
  for (const std::string& id :
       AcceptedRequestIds(ReadFileOrEmpty(victim.process->stderr_path()))) {
    on_victim.insert(id);
  }
  double survivors_ok = 0;
  for (int i = 1; i < kReplicas; ++i) {
    for (const std::string& id : AcceptedRequestIds(
             ReadFileOrEmpty(replicas_[i].process->stderr_path()))) {
      on_survivors.insert(id);
    }
    survivors_ok += SampleValue(Metrics(replicas_[i]),
                                "seqboat_requests_total{code=\"OK\","
                                "frontend=\"grpc\"}")
                        .value_or(0);
  }
  int failed = 0;
  for (const auto& r : out["requests"]) {
    const std::string id = r["request_id"];
    const std::string status = r["status"];
    if (status != "OK") {
      ++failed;
      // A failed stream was the victim's: no survivor saw it. (The victim
      // may not have logged a stream nginx handed it just before the kill,
      // so its own log cannot be the test.)
      EXPECT_EQ(on_survivors.count(id), 0u)
          << id << " failed with " << status << " but a survivor had it";
    } else {
      EXPECT_TRUE(on_victim.count(id) || on_survivors.count(id)) << id;
      EXPECT_EQ(r["output_tokens"], 256) << id;
    }
  }
  EXPECT_GE(failed, 1) << "killing a serving replica failed no stream";
  EXPECT_LE(failed, kConcurrency);
  EXPECT_EQ(out["failed"], failed);
  // The survivors finished everything they were given.
  EXPECT_EQ(survivors_ok, static_cast<double>(on_survivors.size()));
}

}  // namespace
}  // namespace seqboat
