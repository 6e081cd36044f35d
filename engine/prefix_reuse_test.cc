// Prefix state reuse end to end through the engine: a request resumed from a
// snapshot must give the same tokens and logprobs (within 1e-5) as the same
// request computed from scratch, for every block kind alone and for the mixed
// stack, under any prefill chunking.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/testing/block_slices.h"
#include "engine/testing/event_collector.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "weights/safetensors.h"
#include "weights/safetensors_writer.h"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";

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

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  GenerationEvent last;
};

class Runner {
 public:
  Runner(const std::string& model, int64_t cache_bytes, int budget,
         int slots = 4, const std::string& disk_dir = "") {
    EngineOptions o;
    o.model_dir = model;
    o.max_slots = slots;
    o.step_token_budget = budget;
    o.prefix_cache_bytes = cache_bytes;
    o.prefix_cache_dir = disk_dir;
    o.prefix_cache_disk_bytes = disk_dir.empty() ? 0 : int64_t{64} << 20;
    auto e = Engine::Create(o, MakeCpuBackend(1));
    EXPECT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
  }
  ~Runner() { engine_->Shutdown(); }

  Request Make(std::vector<int32_t> prompt, int max_new, EventCollector& c,
               float temperature = 0.0f, uint64_t seed = 0) {
    Request r;
    r.prompt = std::move(prompt);
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.stopping.max_new_tokens = max_new;
    r.stopping.ignore_eos = true;
    r.logprobs = true;
    r.top_logprobs = 5;
    r.sink = c.Sink();
    return r;
  }

  Result Run(std::vector<int32_t> prompt, int max_new, float temperature = 0.0f,
             uint64_t seed = 0) {
    EventCollector c;
    EXPECT_TRUE(
        engine_->Submit(Make(std::move(prompt), max_new, c, temperature, seed))
            .ok());
    Result r;
    r.last = c.done.get_future().get();
    EXPECT_TRUE(r.last.status.ok()) << r.last.status;
    std::lock_guard<std::mutex> lock(c.mu);
    r.tokens = c.tokens;
    r.text = c.text;
    r.logprobs = c.logprobs;
    return r;
  }

  Engine& engine() { return *engine_; }

 private:
  std::unique_ptr<Engine> engine_;
};

void ExpectSame(const Result& cached, const Result& fresh, double tol = 1e-5) {
  ASSERT_EQ(cached.tokens, fresh.tokens);
  EXPECT_EQ(cached.text, fresh.text);
  ASSERT_EQ(cached.logprobs.size(), fresh.logprobs.size());
  for (size_t i = 0; i < fresh.logprobs.size(); ++i) {
    EXPECT_NEAR(cached.logprobs[i].chosen.logprob,
                fresh.logprobs[i].chosen.logprob, tol)
        << "token " << i;
    ASSERT_EQ(cached.logprobs[i].top.size(), fresh.logprobs[i].top.size());
    for (size_t k = 0; k < fresh.logprobs[i].top.size(); ++k) {
      EXPECT_EQ(cached.logprobs[i].top[k].token_id,
                fresh.logprobs[i].top[k].token_id);
      EXPECT_NEAR(cached.logprobs[i].top[k].logprob,
                  fresh.logprobs[i].top[k].logprob, tol);
    }
  }
}

// Turn 1, then turn 2 = turn 1's prompt + answer + new text, on an engine
// with the cache (chunked by `budget`) and on one without it.
// `tol`: how far logprobs may move when the prompt is cut into other chunks
// (GEMMs of other row counts sum in another order).
void CheckTwoTurns(const std::string& model, int budget, double tol = 1e-5) {
  SCOPED_TRACE(absl::StrCat(model, " budget ", budget));
  Runner on(model, 64 << 20, budget);
  Runner off(model, 0, 512);
  const std::vector<int32_t> p1 = Tokens(45, 1);
  const Result t1 = on.Run(p1, 9);
  ExpectSame(t1, off.Run(p1, 9), tol);
  EXPECT_EQ(t1.last.cached_prompt_tokens, 0);

  const std::vector<int32_t> p2 = Concat(Concat(p1, t1.tokens), Tokens(13, 2));
  const Result t2 = on.Run(p2, 12);
  // Everything but the answer's last token was in the state at its end.
  EXPECT_EQ(t2.last.cached_prompt_tokens, 45 + 9 - 1);
  EXPECT_EQ(t2.last.prompt_tokens, static_cast<int32_t>(p2.size()));
  const Result fresh = off.Run(p2, 12);
  EXPECT_EQ(fresh.last.cached_prompt_tokens, 0);
  ExpectSame(t2, fresh, tol);

  // Seeded sampling draws the same text from the restored state.
  const std::vector<int32_t> p3 = Concat(p2, Tokens(5, 3));
  const Result s_on = on.Run(p3, 10, 0.9f, 1234);
  EXPECT_GT(s_on.last.cached_prompt_tokens, 0);
  ExpectSame(s_on, off.Run(p3, 10, 0.9f, 1234), tol);
}

TEST(PrefixReuseTest, MixedStackIsExactUnderAnyChunking) {
  for (int budget : {512, 7, 1}) CheckTwoTurns(kTinyHybrid, budget);
}

// The same tokens; logprobs of unlikely tokens (around -9) move by up to
// 1.3e-5 with the chunking: the L2 and RMS norms of every head pass the
// GEMMs' last-bit differences on at a few times their size.
TEST(PrefixReuseTest, GatedDeltaNetStackIsExactUnderAnyChunking) {
  for (int budget : {512, 7, 1}) CheckTwoTurns(kTinyGdn, budget, 5e-5);
}

TEST(PrefixReuseTest, EveryBlockKindAloneIsExact) {
  nlohmann::json config = nlohmann::json::parse(
      ReadFile(std::string(kTinyHybrid) + "/config.json"));
  std::set<std::string> seen;
  for (int i = 0; i < static_cast<int>(config["blocks"].size()); ++i) {
    const std::string kind = config["blocks"][i]["kind"];
    if (!seen.insert(kind).second) continue;
    SCOPED_TRACE(kind);
    CheckTwoTurns(SliceBlock(i), 5);
  }
  EXPECT_EQ(seen, (std::set<std::string>{"mamba1", "seqboat", "attention",
                                         "moe", "s4d", "mlp", "mamba2"}));
}

TEST(PrefixReuseTest, PromptSnapshotServesARepeatAndAnExtension) {
  Runner on(kTinyHybrid, 64 << 20, 16);
  Runner off(kTinyHybrid, 0, 512);
  const std::vector<int32_t> p = Tokens(40, 4);
  // Stopped by the client before any output: the prompt snapshot still
  // stands (taken at a consistent point, the prompt but its last token).
  const Result first = on.Run(p, 1);
  EXPECT_EQ(first.last.cached_prompt_tokens, 0);
  const Result again = on.Run(p, 6);
  EXPECT_EQ(again.last.cached_prompt_tokens, 39);
  ExpectSame(again, off.Run(p, 6));
  const std::vector<int32_t> longer = Concat(p, Tokens(20, 5));
  const Result ext = on.Run(longer, 6);
  // The longest snapshot: p itself, left by `first` when it finished after
  // one token (nothing of its output was fed back).
  EXPECT_EQ(ext.last.cached_prompt_tokens, 40);
  ExpectSame(ext, off.Run(longer, 6));
}

TEST(PrefixReuseTest, ConcurrentRequestsShareOneSnapshot) {
  Runner on(kTinyHybrid, 64 << 20, 8, /*slots=*/6);
  Runner off(kTinyHybrid, 0, 512, /*slots=*/6);
  const std::vector<int32_t> p1 = Tokens(30, 6);
  const Result t1 = on.Run(p1, 5);
  const std::vector<int32_t> shared = Concat(p1, t1.tokens);
  constexpr int kN = 5;
  std::vector<std::unique_ptr<EventCollector>> cs;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < kN; ++i) {
    cs.push_back(std::make_unique<EventCollector>());
    // Two identical prompts, three that diverge after the shared prefix.
    prompts.push_back(Concat(shared, Tokens(3 + (i < 2 ? 0 : i), 7 + i)));
    ASSERT_TRUE(on.engine().Submit(on.Make(prompts[i], 8, *cs[i])).ok());
  }
  for (int i = 0; i < kN; ++i) {
    GenerationEvent last = cs[i]->done.get_future().get();
    ASSERT_TRUE(last.status.ok());
    EXPECT_EQ(last.cached_prompt_tokens, 30 + 5 - 1) << i;
    Result r;
    r.tokens = cs[i]->tokens;
    r.text = cs[i]->text;
    r.logprobs = cs[i]->logprobs;
    ExpectSame(r, off.Run(prompts[i], 8));
  }
}

TEST(PrefixReuseTest, SmallBudgetEvictsAndStaysExact) {
  // tiny_hybrid's state is a few KiB per slot: room for about two snapshots.
  Runner sizing(kTinyHybrid, 0, 512);
  const int64_t per_slot = sizing.engine().summary().state_bytes_per_slot;
  ASSERT_GT(per_slot, 0);
  const int64_t budget = 2 * per_slot + 1024;
  Runner on(kTinyHybrid, budget, 16);
  Runner off(kTinyHybrid, 0, 512);
  std::vector<int32_t> history = Tokens(20, 8);
  for (int turn = 0; turn < 5; ++turn) {
    const Result r = on.Run(history, 4);
    ExpectSame(r, off.Run(history, 4));
    if (turn > 0) EXPECT_GT(r.last.cached_prompt_tokens, 0) << turn;
    history = Concat(Concat(history, r.tokens), Tokens(6, 9 + turn));
    const PrefixCacheStats st = on.engine().Stats().prefix_cache;
    EXPECT_LE(st.bytes, budget);
    EXPECT_LE(st.snapshots, 2);
  }
  const PrefixCacheStats st = on.engine().Stats().prefix_cache;
  EXPECT_GT(st.evicted, 0);
  EXPECT_EQ(st.budget_bytes, budget);
  EXPECT_GT(st.hits, 0);
  EXPECT_GT(st.queries, st.hits);
}

TEST(PrefixReuseTest, BudgetZeroChangesNothing) {
  Runner off(kTinyMamba, 0, 512);
  const std::vector<int32_t> p1 = Tokens(25, 10);
  const Result t1 = off.Run(p1, 6);
  const Result t2 = off.Run(Concat(p1, t1.tokens), 6);
  EXPECT_EQ(t2.last.cached_prompt_tokens, 0);
  const PrefixCacheStats st = off.engine().Stats().prefix_cache;
  EXPECT_EQ(st.snapshots, 0);
  EXPECT_EQ(st.bytes, 0);
  EXPECT_EQ(st.hits, 0);
}

TEST(PrefixReuseTest, NegativeBudgetIsRefused) {
  EngineOptions o;
  o.model_dir = kTinyMamba;
  o.prefix_cache_bytes = -1;
  auto e = Engine::Create(o, MakeCpuBackend(1));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("prefix_cache_bytes"),
            std::string::npos);
}

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(testing::TempDir(), "/", name);
  std::system(absl::StrCat("rm -rf ", dir).c_str());
  return dir;
}

// Waits (polling, no deadline: the test's own timeout bounds it) until the
// disk tier has written `files` snapshots.
void AwaitDiskWrites(Engine& engine, int64_t files) {
  while (engine.Stats().prefix_cache_disk_stats.writes < files) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// A memory cache of one snapshot over a disk tier: conversation A's
// snapshots go to disk when B's turn evicts them, A's next turn is served
// from disk, and so is the turn after that on an engine restarted over the
// same directory; every turn equals a fresh decode. False, checking
// nothing, for a model without per-sequence state (nothing to restore).
bool CheckDiskRestore(const std::string& model, const std::string& name) {
  SCOPED_TRACE(model);
  const std::string dir = FreshDir("disk_" + name);
  int64_t per_slot = 0;
  {
    Runner sizing(model, 0, 512);
    per_slot = sizing.engine().summary().state_bytes_per_slot;
  }
  if (per_slot == 0) return false;
  // Room for one snapshot of up to 128 tokens, never two.
  const int64_t one_snapshot = per_slot + 512;
  EXPECT_GT(per_slot, 512);
  Runner off(model, 0, 512);
  const std::vector<int32_t> a1 = Tokens(45, 20);
  std::vector<int32_t> a2;
  {
    Runner on(model, one_snapshot, 16, 4, dir);
    const Result t1 = on.Run(a1, 9);
    ExpectSame(t1, off.Run(a1, 9));
    // B's snapshots push A's out of memory and onto disk.
    on.Run(Tokens(30, 21), 4);
    AwaitDiskWrites(on.engine(), 2);
    a2 = Concat(Concat(a1, t1.tokens), Tokens(13, 22));
    const Result t2 = on.Run(a2, 12);
    EXPECT_EQ(t2.last.cached_prompt_tokens, 45 + 9 - 1);
    ExpectSame(t2, off.Run(a2, 12));
    const EngineStats st = on.engine().Stats();
    EXPECT_TRUE(st.prefix_cache_disk);
    EXPECT_EQ(st.prefix_cache_disk_stats.hits, 1);
    EXPECT_EQ(st.prefix_cache_disk_stats.hit_tokens, 45 + 9 - 1);
    a2 = Concat(a2, t2.tokens);
  }  // Shutdown writes what memory held: A's last turn
  Runner restarted(model, one_snapshot, 16, 4, dir);
  EXPECT_GT(restarted.engine().Stats().prefix_cache_disk_stats.files, 0);
  const std::vector<int32_t> a3 = Concat(a2, Tokens(7, 23));
  const Result t3 = restarted.Run(a3, 8);
  EXPECT_EQ(t3.last.cached_prompt_tokens, static_cast<int32_t>(a2.size()) - 1);
  ExpectSame(t3, off.Run(a3, 8));
  EXPECT_EQ(restarted.engine().Stats().prefix_cache_disk_stats.hits, 1);
  return true;
}

TEST(PrefixDiskTest, RestoredFromDiskIsExactForEveryKind) {
  EXPECT_TRUE(CheckDiskRestore(kTinyHybrid, "hybrid"));
  EXPECT_TRUE(CheckDiskRestore(kTinyGdn, "gdn"));
  EXPECT_TRUE(CheckDiskRestore(kTinyMamba, "mamba"));
  nlohmann::json config = nlohmann::json::parse(
      ReadFile(std::string(kTinyHybrid) + "/config.json"));
  std::set<std::string> seen, with_state;
  for (int i = 0; i < static_cast<int>(config["blocks"].size()); ++i) {
    const std::string kind = config["blocks"][i]["kind"];
    if (!seen.insert(kind).second) continue;
    if (CheckDiskRestore(SliceBlock(i), kind)) with_state.insert(kind);
  }
  // moe and mlp keep no state per sequence.
  EXPECT_EQ(with_state, (std::set<std::string>{"mamba1", "seqboat", "attention",
                                               "s4d", "mamba2"}));
}

TEST(PrefixDiskTest, AnotherModelsSnapshotsAreRefused) {
  const std::string dir = FreshDir("disk_foreign");
  {
    Runner mamba(kTinyMamba, 64 << 20, 16, 4, dir);
    mamba.Run(Tokens(20, 30), 3);
  }  // its snapshots written at shutdown
  Runner hybrid(kTinyHybrid, 64 << 20, 16, 4, dir);
  const SnapshotDiskStats st = hybrid.engine().Stats().prefix_cache_disk_stats;
  EXPECT_EQ(st.files, 0);
  EXPECT_GT(st.refused[static_cast<int>(SnapshotRefusal::kIdentity)], 0);
  const Result r = hybrid.Run(Concat(Tokens(20, 30), Tokens(5, 31)), 3);
  EXPECT_EQ(r.last.cached_prompt_tokens, 0);
}

// A file that fails its checksum when read back is deleted and counted, and
// the request prefills instead, with the output a fresh decode gives.
TEST(PrefixDiskTest, ACorruptFileIsNeverServed) {
  const std::string dir = FreshDir("disk_corrupt");
  const std::vector<int32_t> p1 = Tokens(30, 40);
  std::vector<int32_t> p2;
  {
    Runner on(kTinyHybrid, 64 << 20, 16, 4, dir);
    p2 = Concat(Concat(p1, on.Run(p1, 5).tokens), Tokens(6, 41));
  }  // the snapshots go to disk
  int flipped = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    // One byte of the state, past the header and the tokens.
    std::fstream f(entry.path(),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-64, std::ios::end);
    char c = 0;
    f.read(&c, 1);
    f.seekp(-64, std::ios::end);
    c ^= 0x5a;
    f.write(&c, 1);
    ++flipped;
  }
  ASSERT_GT(flipped, 0);
  Runner restarted(kTinyHybrid, 64 << 20, 16, 4, dir);
  Runner off(kTinyHybrid, 0, 512);
  const Result r = restarted.Run(p2, 6);
  EXPECT_EQ(r.last.cached_prompt_tokens, 0);
  ExpectSame(r, off.Run(p2, 6));
  const SnapshotDiskStats st =
      restarted.engine().Stats().prefix_cache_disk_stats;
  EXPECT_EQ(st.hits, 0);
  EXPECT_GE(st.refused[static_cast<int>(SnapshotRefusal::kCorrupt)], 1);
}

TEST(PrefixDiskTest, DiskWithoutABudgetIsRefused) {
  EngineOptions o;
  o.model_dir = kTinyMamba;
  o.prefix_cache_bytes = 1 << 20;
  o.prefix_cache_dir = FreshDir("disk_no_budget");
  auto e = Engine::Create(o, MakeCpuBackend(1));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(std::string(e.status().message()).find("prefix_cache_disk_bytes"),
            std::string::npos);
}

}  // namespace
}  // namespace seqboat
