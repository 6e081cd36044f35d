// Snapshots moved between engines (replicas): an exported snapshot imported
// into another engine continues exactly as the exporter would (every layer
// kind with state), bytes of another model or cut short or corrupt are
// refused, and an engine that asks its peers at admission imports what they
// answer, counts what it refuses, and prefills as usual when they fail.
#include "engine/snapshot_exchange.h"

#include <chrono>
#include <cstdlib>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/testing/block_slices.h"
#include "engine/testing/event_collector.h"
#include "engine/testing/greedy_run.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";
constexpr absl::Duration kWait = absl::Seconds(30);

std::vector<int32_t> Tokens(int len, int salt) {
  std::vector<int32_t> p(len);
  for (int i = 0; i < len; ++i) p[i] = (i * 37 + salt * 11 + 5) % 251;
  return p;
}

std::vector<int32_t> Concat(std::vector<int32_t> a,
                            const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::unique_ptr<Engine> MakeEngine(const std::string& model,
                                   int64_t cache_bytes,
                                   const std::string& disk_dir = "",
                                   bool write_through = false) {
  EngineOptions o;
  o.model_dir = model;
  o.max_slots = 4;
  o.step_token_budget = 16;
  o.prefix_cache_bytes = cache_bytes;
  o.prefix_cache_dir = disk_dir;
  o.prefix_cache_disk_bytes = disk_dir.empty() ? 0 : int64_t{64} << 20;
  o.prefix_cache_disk_write_through = write_through;
  auto e = Engine::Create(o, MakeCpuBackend(1));
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

using Result = GreedyResult;

// The exporter runs a first turn and exports the snapshot a second turn
// extends; an importer that never saw the conversation continues the second
// turn from it with the tokens the exporter gives. False, checking nothing,
// for a model without per-sequence state.
bool CheckExportImport(const std::string& model) {
  SCOPED_TRACE(model);
  auto exporter = MakeEngine(model, 64 << 20);
  if (exporter->summary().state_bytes_per_slot == 0) return false;
  auto importer = MakeEngine(model, 64 << 20);
  EXPECT_EQ(exporter->summary().snapshot_identity,
            importer->summary().snapshot_identity);
  const std::vector<int32_t> p1 = Tokens(45, 1);
  const Result t1 = RunGreedy(*exporter, p1, 9);
  const std::vector<int32_t> p2 = Concat(Concat(p1, t1.tokens), Tokens(13, 2));
  const std::vector<int32_t> asked(p2.begin(), p2.end() - 1);
  absl::StatusOr<std::string> bytes =
      exporter->ExportSnapshot("", asked, 0, kWait);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  if (!bytes.ok()) return true;
  // Nothing longer than the snapshot itself: NOT_FOUND.
  EXPECT_TRUE(absl::IsNotFound(
      exporter->ExportSnapshot("", asked, 45 + 9 - 1, kWait).status()));
  EXPECT_TRUE(absl::IsNotFound(
      exporter->ExportSnapshot("b", asked, 0, kWait).status()));
  EXPECT_TRUE(importer->ImportSnapshot(*bytes, kWait).ok());
  const Result imported = RunGreedy(*importer, p2, 12);
  EXPECT_EQ(imported.cached, 45 + 9 - 1);
  const Result own = RunGreedy(*exporter, p2, 12);
  EXPECT_EQ(own.cached, 45 + 9 - 1);
  EXPECT_EQ(imported.tokens, own.tokens);
  return true;
}

TEST(SnapshotExchangeTest, AnImportContinuesAsTheExporterForEveryKind) {
  EXPECT_TRUE(CheckExportImport(kTinyHybrid));
  EXPECT_TRUE(CheckExportImport(kTinyGdn));
  EXPECT_TRUE(CheckExportImport(kTinyMamba));
  nlohmann::json config = nlohmann::json::parse(
      ReadFile(std::string(kTinyHybrid) + "/config.json"));
  std::set<std::string> seen, with_state;
  for (int i = 0; i < static_cast<int>(config["blocks"].size()); ++i) {
    const std::string kind = config["blocks"][i]["kind"];
    if (!seen.insert(kind).second) continue;
    if (CheckExportImport(SliceBlock(i))) with_state.insert(kind);
  }
  EXPECT_EQ(with_state, (std::set<std::string>{"mamba1", "seqboat", "attention",
                                               "s4d", "mamba2"}));
}

TEST(SnapshotExchangeTest, ForeignCutShortOrCorruptBytesAreRefused) {
  auto mamba = MakeEngine(kTinyMamba, 64 << 20);
  auto hybrid = MakeEngine(kTinyHybrid, 64 << 20);
  const std::vector<int32_t> p = Tokens(30, 3);
  RunGreedy(*mamba, p, 4);
  RunGreedy(*hybrid, p, 4);
  absl::StatusOr<std::string> foreign = mamba->ExportSnapshot("", p, 0, kWait);
  ASSERT_TRUE(foreign.ok()) << foreign.status();
  absl::StatusOr<std::string> own = hybrid->ExportSnapshot("", p, 0, kWait);
  ASSERT_TRUE(own.ok()) << own.status();
  auto fresh = MakeEngine(kTinyHybrid, 64 << 20);
  auto refused = [&](const std::string& bytes, const std::string& why) {
    const absl::Status s = fresh->ImportSnapshot(bytes, kWait);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    EXPECT_NE(std::string(s.message()).find(why), std::string::npos) << s;
  };
  refused(*foreign, "identity");
  refused(own->substr(0, own->size() / 2), "truncated");
  refused(*own + "extra", "truncated");
  std::string corrupt = *own;
  corrupt[corrupt.size() - 64] ^= 0x11;
  refused(corrupt, "checksum");
  EXPECT_EQ(fresh->Stats().prefix_cache.snapshots, 0);
  EXPECT_TRUE(fresh->ImportSnapshot(*own, kWait).ok());
  EXPECT_EQ(fresh->Stats().prefix_cache.snapshots, 1);
  auto off = MakeEngine(kTinyHybrid, 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(off->ImportSnapshot(*own, kWait)));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      off->ExportSnapshot("", p, 0, kWait).status()));
}

// Peers answered by a function, on a thread of their own as the gRPC
// client's callbacks are.
class FakePeers final : public SnapshotPeers {
 public:
  using Answer = std::function<absl::StatusOr<std::string>(const PeerFetch&)>;
  explicit FakePeers(Answer answer) : answer_(std::move(answer)) {}
  ~FakePeers() override {
    for (std::thread& t : threads_) t.join();
  }
  void FetchAsync(
      PeerFetch fetch,
      std::function<void(absl::StatusOr<std::string>)> done) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++asked_;
    threads_.emplace_back([this, fetch = std::move(fetch),
                           done = std::move(done)] { done(answer_(fetch)); });
  }
  int asked() {
    std::lock_guard<std::mutex> lock(mu_);
    return asked_;
  }

 private:
  Answer answer_;
  std::mutex mu_;
  int asked_ = 0;
  std::vector<std::thread> threads_;
};

struct PeerCase {
  std::unique_ptr<Engine> owner;  // served the first turn
  std::vector<int32_t> p2;        // the second turn
  Result own;                     // the owner's answer to it
};

PeerCase FirstTurnOnTheOwner() {
  PeerCase c;
  c.owner = MakeEngine(kTinyHybrid, 64 << 20);
  const std::vector<int32_t> p1 = Tokens(40, 7);
  const Result t1 = RunGreedy(*c.owner, p1, 6);
  c.p2 = Concat(Concat(p1, t1.tokens), Tokens(10, 8));
  // Its own continuation, from an engine that forgets it afterwards.
  auto twin = MakeEngine(kTinyHybrid, 0);
  c.own = RunGreedy(*twin, c.p2, 8);
  return c;
}

TEST(SnapshotExchangeTest, AMissAsksThePeersAndResumesFromTheirSnapshot) {
  PeerCase c = FirstTurnOnTheOwner();
  Engine* owner = c.owner.get();
  auto peers = std::make_shared<FakePeers>([owner](const PeerFetch& f) {
    return owner->ExportSnapshot(f.scope, f.tokens, f.min_tokens, kWait);
  });
  auto replica = MakeEngine(kTinyHybrid, 64 << 20);
  ASSERT_TRUE(replica->SetSnapshotPeers(peers, 8).ok());
  const Result r = RunGreedy(*replica, c.p2, 8);
  EXPECT_EQ(r.cached, 40 + 6 - 1);
  EXPECT_EQ(r.tokens, c.own.tokens);
  PeerFetchStats st = replica->Stats().peer_fetch;
  EXPECT_EQ(st.fetches, 1);
  EXPECT_EQ(st.hits, 1);
  EXPECT_EQ(st.hit_tokens, 40 + 6 - 1);
  EXPECT_GT(st.bytes, replica->summary().state_bytes_per_slot);
  // The next turn extends its own snapshot: within min_tokens, no question.
  const std::vector<int32_t> p3 = Concat(Concat(c.p2, r.tokens), Tokens(3, 9));
  EXPECT_EQ(RunGreedy(*replica, p3, 2).cached,
            static_cast<int32_t>(c.p2.size() + r.tokens.size()) - 1);
  EXPECT_EQ(peers->asked(), 1);
  // A prompt the peers have nothing of: a miss, then a cold prefill.
  const Result cold = RunGreedy(*replica, Tokens(30, 10), 2);
  EXPECT_EQ(cold.cached, 0);
  st = replica->Stats().peer_fetch;
  EXPECT_EQ(st.fetches, 2);
  EXPECT_EQ(st.misses, 1);
}

TEST(SnapshotExchangeTest, PeersDownForeignOrOversizeMeanAPrefill) {
  PeerCase c = FirstTurnOnTheOwner();
  absl::StatusOr<std::string> good = c.owner->ExportSnapshot(
      "", std::vector<int32_t>(c.p2.begin(), c.p2.end() - 1), 0, kWait);
  ASSERT_TRUE(good.ok()) << good.status();
  auto mamba = MakeEngine(kTinyMamba, 64 << 20);
  RunGreedy(*mamba, c.p2, 1);
  absl::StatusOr<std::string> foreign = mamba->ExportSnapshot(
      "", std::vector<int32_t>(c.p2.begin(), c.p2.end() - 1), 0, kWait);
  ASSERT_TRUE(foreign.ok()) << foreign.status();
  std::string corrupt = *good;
  corrupt[corrupt.size() - 40] ^= 0x7;
  const std::vector<std::pair<absl::StatusOr<std::string>, const char*>>
      answers = {{absl::UnavailableError("connection refused"), "down"},
                 {absl::DeadlineExceededError("slow"), "slow"},
                 {*foreign, "identity"},
                 {corrupt, "checksum"},
                 {*good + std::string(1 << 16, 'x'), "oversize"}};
  for (const auto& [answer, name] : answers) {
    SCOPED_TRACE(name);
    auto peers = std::make_shared<FakePeers>(
        [answer = answer](const PeerFetch&) { return answer; });
    auto replica = MakeEngine(kTinyHybrid, 64 << 20);
    ASSERT_TRUE(replica->SetSnapshotPeers(peers, 8).ok());
    const Result r = RunGreedy(*replica, c.p2, 8);
    EXPECT_EQ(r.cached, 0);
    EXPECT_EQ(r.tokens, c.own.tokens);
    const PeerFetchStats st = replica->Stats().peer_fetch;
    EXPECT_EQ(st.fetches, 1);
    EXPECT_EQ(st.hits, 0);
    if (answer.ok()) {
      int refused = 0;
      for (int64_t n : st.refused) refused += static_cast<int>(n);
      EXPECT_EQ(refused, 1);
    } else {
      EXPECT_EQ(st.failed, 1);
    }
  }
}

// A drain writes the snapshots in memory to the disk tier when it begins,
// before any request has finished or the engine stopped.
TEST(SnapshotExchangeTest, ADrainWritesTheHotSnapshotsFirst) {
  const std::string dir = absl::StrCat(testing::TempDir(), "/drain_first");
  std::system(absl::StrCat("rm -rf ", dir).c_str());
  auto engine = MakeEngine(kTinyHybrid, 64 << 20, dir);
  RunGreedy(*engine, Tokens(30, 11), 4);
  RunGreedy(*engine, Tokens(25, 12), 4);
  const int64_t held = engine->Stats().prefix_cache.snapshots;
  ASSERT_GT(held, 0);
  EXPECT_EQ(engine->Stats().prefix_cache_disk_stats.writes, 0);
  engine->BeginDrain();
  const SnapshotDiskStats st = engine->Stats().prefix_cache_disk_stats;
  EXPECT_EQ(st.writes, held);
  EXPECT_EQ(st.files, held);
  engine->Shutdown();
  // Shutdown finds them written: nothing new.
  EXPECT_EQ(engine->Stats().prefix_cache_disk_stats.writes, held);
}

// Written through, the snapshots are on disk while the engine runs: a copy
// of its directory taken then (what a replica killed at that moment
// leaves) serves the next turn from disk.
TEST(SnapshotExchangeTest, WrittenThroughSnapshotsOutliveAKill) {
  const std::string dir = absl::StrCat(testing::TempDir(), "/write_through");
  const std::string left = dir + "_left";
  std::system(absl::StrCat("rm -rf ", dir, " ", left).c_str());
  auto engine = MakeEngine(kTinyHybrid, 64 << 20, dir, /*write_through=*/true);
  const std::vector<int32_t> p1 = Tokens(30, 13);
  const Result t1 = RunGreedy(*engine, p1, 5);
  const int64_t held = engine->Stats().prefix_cache.snapshots;
  ASSERT_GT(held, 0);
  while (engine->Stats().prefix_cache_disk_stats.writes < held) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(std::system(absl::StrCat("cp -r ", dir, " ", left).c_str()), 0);
  const std::vector<int32_t> p2 = Concat(Concat(p1, t1.tokens), Tokens(6, 14));
  const Result own = RunGreedy(*engine, p2, 6);
  auto restarted = MakeEngine(kTinyHybrid, 64 << 20, left);
  const Result r = RunGreedy(*restarted, p2, 6);
  EXPECT_EQ(r.cached, 30 + 5 - 1);
  EXPECT_EQ(r.tokens, own.tokens);
  EXPECT_EQ(restarted->Stats().prefix_cache_disk_stats.hits, 1);
}

}  // namespace
}  // namespace seqboat
