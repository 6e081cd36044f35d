// Speculative decoding through the engine changes nothing of the output:
// greedy and seeded sampled requests give the tokens (and logprobs) decoding
// without it gives, for every block kind alone and for the stacks, under
// prefix reuse, n > 1 and chunked prefill; drafts are verified and counted;
// and the state a partly rejected draft leaves equals a fresh decode's.
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/model/model.h"
#include "engine/testing/block_slices.h"
#include "engine/testing/event_collector.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";

// A prompt that repeats itself, so prompt lookup finds drafts from the start.
std::vector<int32_t> RepetitivePrompt(int salt) {
  std::vector<int32_t> unit;
  for (int i = 0; i < 9; ++i) unit.push_back((i * 29 + salt * 13 + 3) % 251);
  std::vector<int32_t> p;
  for (int r = 0; r < 4; ++r) p.insert(p.end(), unit.begin(), unit.end());
  return p;
}

struct Output {
  std::vector<std::vector<int32_t>> tokens;  // per sequence
  std::vector<TokenLogprobs> logprobs;       // of sequence 0's... all
  std::vector<GenerationEvent> finals;
};

struct Options {
  int draft_tokens = 0;  // 0: no speculation
  int budget = 512;
  int64_t cache_bytes = 0;
  int slots = 6;
  // A draft model's directory: speculation by draft_model, not prompt lookup.
  std::string draft_model;
  bool adaptive = true;   // EngineOptions::adaptive_draft_length
  int32_t max_batch = 8;  // EngineOptions::speculative_max_batch
};

class Runner {
 public:
  Runner(const std::string& model, const Options& o) : o_(o) {
    EngineOptions eo;
    eo.model_dir = model;
    eo.max_slots = o.slots;
    eo.step_token_budget = o.budget;
    eo.prefix_cache_bytes = o.cache_bytes;
    if (o.draft_tokens > 0) eo.draft_model_dir = o.draft_model;
    eo.adaptive_draft_length = o.adaptive;
    eo.speculative_max_batch = o.max_batch;
    auto e = Engine::Create(eo, MakeCpuBackend(1));
    EXPECT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
  }
  ~Runner() { engine_->Shutdown(); }

  Output Run(const std::vector<int32_t>& prompt, int max_new, int n = 1,
             float temperature = 0.0f, uint64_t seed = 0,
             std::vector<int32_t> stop_ids = {}) {
    EventCollector c;
    c.n = n;
    Request r;
    r.prompt = prompt;
    r.n = n;
    r.sampling.temperature = temperature;
    r.sampling.seed = seed;
    r.stopping.max_new_tokens = max_new;
    r.stopping.ignore_eos = true;
    r.stopping.stop_token_ids = std::move(stop_ids);
    r.logprobs = true;
    r.top_logprobs = 3;
    if (o_.draft_tokens > 0) {
      r.speculative.method = o_.draft_model.empty()
                                 ? SpeculativeMethod::kPromptLookup
                                 : SpeculativeMethod::kDraftModel;
      r.speculative.num_draft_tokens = o_.draft_tokens;
      r.speculative.ngram_min = 1;
      r.speculative.ngram_max = 3;
    }
    r.sink = c.Sink();
    EXPECT_TRUE(engine_->Submit(std::move(r)).ok());
    c.done.get_future().get();
    std::lock_guard<std::mutex> lock(c.mu);
    EXPECT_FALSE(c.bad_index || c.after_final);
    Output out{c.tokens_of, c.logprobs, c.final_of};
    for (const GenerationEvent& f : out.finals) EXPECT_TRUE(f.status.ok());
    return out;
  }

  Engine& engine() { return *engine_; }

 private:
  Options o_;
  std::unique_ptr<Engine> engine_;
};

// Logprobs come from rows computed in segments of other lengths: GEMMs of
// other row counts may sum in another order.
void ExpectSame(const Output& spec, const Output& plain, double tol = 5e-5) {
  ASSERT_EQ(spec.tokens, plain.tokens);
  ASSERT_EQ(spec.finals.size(), plain.finals.size());
  for (size_t i = 0; i < spec.finals.size(); ++i) {
    EXPECT_EQ(spec.finals[i].finish, plain.finals[i].finish);
    EXPECT_EQ(spec.finals[i].generated_tokens,
              plain.finals[i].generated_tokens);
  }
  ASSERT_EQ(spec.logprobs.size(), plain.logprobs.size());
  // Arrival order differs between sequences of a request of n; compare the
  // multiset loosely through sorted chosen logprobs.
  std::vector<float> a, b;
  for (const auto& lp : spec.logprobs) a.push_back(lp.chosen.logprob);
  for (const auto& lp : plain.logprobs) b.push_back(lp.chosen.logprob);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], tol) << i;
}

// Greedy and seeded sampling, alone and n = 3, with and without the prefix
// cache; returns the speculation counts of the speculating engine.
SpeculationCounts CheckSame(const std::string& model, Options o) {
  SCOPED_TRACE(absl::StrCat(model, " budget ", o.budget, " k ", o.draft_tokens,
                            " cache ", o.cache_bytes));
  Options plain_o = o;
  plain_o.draft_tokens = 0;
  Runner spec(model, o), plain(model, plain_o);
  for (int salt = 0; salt < 3; ++salt) {
    const std::vector<int32_t> p = RepetitivePrompt(salt);
    ExpectSame(spec.Run(p, 23), plain.Run(p, 23));
    ExpectSame(spec.Run(p, 17, 1, 0.8f, 99 + salt),
               plain.Run(p, 17, 1, 0.8f, 99 + salt));
  }
  const std::vector<int32_t> p = RepetitivePrompt(5);
  ExpectSame(spec.Run(p, 12, 3, 0.9f, 7), plain.Run(p, 12, 3, 0.9f, 7));
  // A second turn over the first's answer: with the cache, restored from the
  // snapshot the speculating sequence left.
  const Output first = plain.Run(p, 10);
  std::vector<int32_t> p2 = p;
  p2.insert(p2.end(), first.tokens[0].begin(), first.tokens[0].end());
  p2.insert(p2.end(), p.begin(), p.begin() + 5);
  spec.Run(p, 10);
  const Output second = spec.Run(p2, 15);
  if (o.cache_bytes > 0) {
    EXPECT_GT(second.finals[0].cached_prompt_tokens, 0);
  }
  ExpectSame(second, plain.Run(p2, 15));
  // A stop id ends a round part-way.
  const std::vector<int32_t> stop = {first.tokens[0][6]};
  ExpectSame(spec.Run(p, 20, 1, 0.0f, 0, stop),
             plain.Run(p, 20, 1, 0.0f, 0, stop));
  return spec.engine().Stats().speculation;
}

TEST(SpeculativeDecodingTest, StacksDecodeAsWithoutIt) {
  for (const char* model : {kTinyHybrid, kTinyGdn, kTinyMamba}) {
    for (int k : {1, 4}) {
      const SpeculationCounts c =
          CheckSame(model, {k, 512, int64_t{64} << 20, 6});
      EXPECT_GT(c.drafts, 0) << model;
      EXPECT_GT(c.accepted_tokens, 0) << model;
      EXPECT_LE(c.accepted_tokens, c.draft_tokens);
      int64_t rounds = 0, accepted = 0;
      for (size_t a = 0; a < c.accepted_per_round.size(); ++a) {
        rounds += c.accepted_per_round[a];
        accepted += static_cast<int64_t>(a) * c.accepted_per_round[a];
      }
      EXPECT_EQ(rounds, c.drafts);
      EXPECT_EQ(accepted, c.accepted_tokens);
      EXPECT_LE(c.accepted_per_round.size(), static_cast<size_t>(k + 1));
    }
  }
}

// A draft model of another stack (the same tokenizer) and the target itself
// as its own draft model: the output is the target's either way; the
// target's own greedy drafts are always right.
TEST(SpeculativeDecodingTest, DraftModelsDecodeAsWithoutIt) {
  for (const char* model : {kTinyHybrid, kTinyGdn, kTinyMamba}) {
    for (const char* draft : {kTinyMamba, model}) {
      Options o{3, 512, int64_t{64} << 20, 6, draft};
      const SpeculationCounts c = CheckSame(model, o);
      EXPECT_GT(c.drafts, 0) << model << " " << draft;
      EXPECT_LE(c.accepted_tokens, c.draft_tokens);
    }
  }
  Options self{4, 9, 0, 6, kTinyHybrid};
  Runner r(kTinyHybrid, self);
  for (int salt = 0; salt < 3; ++salt) r.Run(RepetitivePrompt(salt), 21);
  const EngineStats stats = r.engine().Stats();
  const SpeculationCounts& c = stats.speculation_by_method.at("draft_model");
  EXPECT_GT(c.drafts, 5);
  EXPECT_EQ(c.accepted_tokens, c.draft_tokens);
  EXPECT_EQ(stats.speculation_by_method.count("prompt_lookup"), 0u);
}

TEST(SpeculativeDecodingTest, DraftModelUnderEveryBlockKind) {
  for (const auto& [kind, dir] : EachBlockKind({kTinyHybrid, kTinyGdn})) {
    SCOPED_TRACE(kind);
    CheckSame(dir, {4, 7, int64_t{64} << 20, 6, kTinyMamba});
  }
}

// Drafts of the request's full length every round, and drafts that follow
// their acceptance (on in every other test here): the output is decoding's
// without speculation either way.
TEST(SpeculativeDecodingTest, FixedAndAdaptiveDraftLengthsDecodeAlike) {
  for (const char* model : {kTinyHybrid, kTinyMamba}) {
    for (bool adaptive : {false, true}) {
      Options o{4, 512, 0, 6};
      o.adaptive = adaptive;
      const SpeculationCounts c = CheckSame(model, o);
      EXPECT_GT(c.drafts, 0) << model;
      EXPECT_LE(c.draft_tokens, 4 * c.drafts);
      std::printf("%s, %s: %.2f draft tokens a round, %.0f %% taken\n", model,
                  adaptive ? "adaptive" : "fixed",
                  static_cast<double>(c.draft_tokens) / c.drafts,
                  100.0 * c.accepted_tokens / c.draft_tokens);
    }
  }
}

// speculative_max_batch = auto: Create measures it (at most half the slots:
// a speculating sequence holds two) and the engine runs and publishes what
// it found; rounds, if any, change nothing of the output.
TEST(SpeculativeDecodingTest, AutoMaxBatchIsMeasuredAndPublished) {
  Options o{4, 512, 0, 6};
  o.max_batch = kSpeculativeMaxBatchAuto;
  Options plain_o = o;
  plain_o.draft_tokens = 0;
  Runner spec(kTinyHybrid, o), plain(kTinyHybrid, plain_o);
  const int32_t measured = spec.engine().Stats().speculative_max_batch;
  EXPECT_GE(measured, 0);
  EXPECT_LE(measured, 3);
  EXPECT_EQ(spec.engine().options().speculative_max_batch, measured);
  const std::vector<int32_t> p = RepetitivePrompt(1);
  ExpectSame(spec.Run(p, 23), plain.Run(p, 23));
  std::printf("auto: rounds while at most %d sequences run\n", measured);
}

TEST(SpeculativeDecodingTest, ChunkedPrefillAndNoCache) {
  CheckSame(kTinyHybrid, {3, 5, 0, 6});
}

TEST(SpeculativeDecodingTest, EveryBlockKindAloneDecodesAsWithoutIt) {
  for (const auto& [kind, dir] : EachBlockKind({kTinyHybrid, kTinyGdn})) {
    SCOPED_TRACE(kind);
    CheckSame(dir, {4, 7, int64_t{64} << 20, 6});
  }
}

// Rounds never take a slot a waiting request needs: with every slot busy,
// requests still run to the same output.
TEST(SpeculativeDecodingTest, SpareSlotsGiveWayToWaitingRequests) {
  Options o{4, 512, 0, 2};
  Options plain_o = o;
  plain_o.draft_tokens = 0;
  Runner spec(kTinyHybrid, o), plain(kTinyHybrid, plain_o);
  std::vector<std::unique_ptr<EventCollector>> cs;
  for (int i = 0; i < 5; ++i) {
    cs.push_back(std::make_unique<EventCollector>());
    Request r;
    r.prompt = RepetitivePrompt(i);
    r.stopping.max_new_tokens = 16;
    r.stopping.ignore_eos = true;
    r.sampling.temperature = 0.0f;
    r.speculative = {SpeculativeMethod::kPromptLookup, 4, 1, 3};
    r.sink = cs.back()->Sink();
    ASSERT_TRUE(spec.engine().Submit(std::move(r)).ok());
  }
  for (int i = 0; i < 5; ++i) {
    cs[i]->done.get_future().get();
    EXPECT_EQ(cs[i]->tokens, plain.Run(RepetitivePrompt(i), 16).tokens[0]);
  }
  EXPECT_EQ(spec.engine().Stats().free_slots, 2);
}

// A speculating request cancelled mid-stream gives back its slot and its
// spare.
TEST(SpeculativeDecodingTest, CancelGivesBackBothSlots) {
  Runner r(kTinyHybrid, {4, 512, 0, 3});
  EventCollector c;
  Request req;
  req.prompt = RepetitivePrompt(3);
  req.sampling.temperature = 0.0f;
  req.stopping.max_new_tokens = 4000;
  req.stopping.ignore_eos = true;
  req.speculative = {SpeculativeMethod::kPromptLookup, 4, 1, 3};
  auto control = req.control;
  req.sink = c.Sink();
  ASSERT_TRUE(r.engine().Submit(std::move(req)).ok());
  while (r.engine().Stats().speculation.drafts < 3) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(r.engine().Stats().free_slots, 1);  // the slot and its spare
  control->cancelled = true;
  const GenerationEvent last = c.done.get_future().get();
  EXPECT_EQ(last.finish, FinishReason::kCancelled);
  for (int i = 0; i < 1000 && r.engine().Stats().free_slots != 3; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(r.engine().Stats().free_slots, 3);
}

TEST(SpeculativeDecodingTest, BadParamsAreRefused) {
  Runner r(kTinyMamba, {});
  Request req;
  req.prompt = {1, 2, 3};
  req.sink = [](GenerationEvent) {};
  req.speculative = {SpeculativeMethod::kPromptLookup, 99, 1, 3};
  absl::Status s = r.engine().Submit(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("num_draft_tokens"), std::string::npos) << s;
  req.speculative = {SpeculativeMethod::kPromptLookup, 2, 3, 2};
  s = r.engine().Submit(req);
  EXPECT_NE(s.message().find("n-gram"), std::string::npos) << s;
  req.speculative = {SpeculativeMethod::kDraftModel, 2, 1, 3};
  s = r.engine().Submit(req);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--speculative_draft_model_dir"),
            std::string::npos)
      << s;
}

// Sampled output follows the model's distribution: speculating requests and
// plain ones, with different seeds, draw the third token (after the first
// two, where drafts were verified) with frequencies a two-sample chi-square
// test cannot tell apart.
TEST(SpeculativeDecodingTest, SampledTokensFollowTheModelsDistribution) {
  Options o{3, 512, 0, 8};
  Options plain_o = o;
  plain_o.draft_tokens = 0;
  Runner spec(kTinyHybrid, o), plain(kTinyHybrid, plain_o);
  const std::vector<int32_t> prompt = RepetitivePrompt(2);
  constexpr int kDraws = 700;
  // Temperature 0.7 gathers the draws on a few tokens.
  std::map<int32_t, std::array<int, 2>> counts;
  for (int i = 0; i < kDraws; ++i) {
    ++counts[spec.Run(prompt, 5, 1, 0.7f, 1000 + i).tokens[0][3]][0];
    ++counts[plain.Run(prompt, 5, 1, 0.7f, 500000 + i).tokens[0][3]][1];
  }
  const SpeculationCounts c = spec.engine().Stats().speculation;
  ASSERT_GT(c.drafts, 100);
  ASSERT_GT(c.accepted_tokens, 50);
  ASSERT_LT(c.accepted_tokens, c.draft_tokens);
  // Outcomes seen fewer than 10 times in all are pooled.
  std::vector<std::array<int, 2>> bins;
  std::array<int, 2> rare{0, 0};
  for (const auto& [tokens, n] : counts) {
    if (n[0] + n[1] >= 10) {
      bins.push_back(n);
    } else {
      rare[0] += n[0];
      rare[1] += n[1];
    }
  }
  if (rare[0] + rare[1] > 0) bins.push_back(rare);
  ASSERT_GE(bins.size(), 5u) << "too few outcomes for the test to mean much";
  double chi2 = 0;
  for (const auto& n : bins) {
    const double total = n[0] + n[1];
    for (int side = 0; side < 2; ++side) {
      const double expected = total / 2;
      chi2 += (n[side] - expected) * (n[side] - expected) / expected;
    }
  }
  // The 0.999 quantile of chi-square with df degrees of freedom, by
  // Wilson-Hilferty: a false alarm once in a thousand seeds' worth of runs
  // (the seeds are fixed, so the test is deterministic).
  const double df = static_cast<double>(bins.size()) - 1;
  const double z = 3.09, h = 2.0 / (9.0 * df);
  const double limit = df * std::pow(1.0 - h + z * std::sqrt(h), 3.0);
  EXPECT_LT(chi2, limit) << bins.size() << " bins";
  std::printf(
      "%zu bins, chi2 %.2f (limit %.2f), drafts %lld, accepted %lld of %lld\n",
      bins.size(), chi2, limit, static_cast<long long>(c.drafts),
      static_cast<long long>(c.accepted_tokens),
      static_cast<long long>(c.draft_tokens));
}

// The model-level round: the draft in a spare copy of the slot, the unfed
// tokens in the slot. After a partly rejected draft the slot holds what a
// token-by-token decode of the accepted tokens leaves, byte for byte; after a
// draft taken whole the spare does; after a round that skipped the catch-up
// and was partly rejected, the next round's catch-up over all the unfed
// tokens does.
TEST(SpeculativeDecodingTest, StateAfterARoundIsAFreshDecodesBitwise) {
  std::vector<std::pair<std::string, std::string>> models =
      EachBlockKind({kTinyHybrid, kTinyGdn});
  for (const char* stack : {kTinyHybrid, kTinyGdn, kTinyMamba})
    models.emplace_back(stack, stack);
  for (const auto& [name, model] : models) {
    SCOPED_TRACE(name);
    auto backend = MakeCpuBackend(1);
    ModelLimits limits{4, 64, std::vector<int>{}, 16};
    auto loaded = Model::Load(model, *backend, limits);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    Model& m = **loaded;
    SlotArena& arena = m.arena();
    const int fresh = *arena.Acquire(), slot = *arena.Acquire(),
              spare = *arena.Acquire();
    const std::vector<int32_t> prompt = RepetitivePrompt(1);
    std::vector<float> logits(16 * m.vocab_size());
    const int n = static_cast<int>(prompt.size());
    for (int s : {fresh, slot}) {
      ASSERT_TRUE(
          m.Forward(StepRows{prompt, {{s, 0, n}}, {n - 1}}, logits.data())
              .ok());
    }
    // Fresh: 7, 8, 9 one at a time.
    for (int32_t t : {7, 8, 9}) {
      ASSERT_TRUE(
          m.Forward(StepRows{{t}, {{fresh, 0, 1}}, {0}}, logits.data()).ok());
    }
    // Round 1: unfed [7], draft [8, 9, 40] rejected at its last token; the
    // slot runs [7] alone.
    arena.CopySlot(spare, slot);
    ASSERT_TRUE(m.Forward(StepRows{{7, 7, 8, 9, 40},
                                   {{slot, 0, 1}, {spare, 1, 4}},
                                   {1, 2, 3, 4}},
                          logits.data())
                    .ok());
    // Round 2: unfed [8, 9] (accepted, then the model's own token); no draft.
    ASSERT_TRUE(
        m.Forward(StepRows{{8, 9}, {{slot, 0, 2}}, {1}}, logits.data()).ok());
    EXPECT_EQ(arena.Snapshot(slot), arena.Snapshot(fresh));
    // Round 3: unfed [5], draft [6] taken whole: the spare is the state.
    for (int32_t t : {5, 6}) {
      ASSERT_TRUE(
          m.Forward(StepRows{{t}, {{fresh, 0, 1}}, {0}}, logits.data()).ok());
    }
    arena.CopySlot(spare, slot);
    ASSERT_TRUE(
        m.Forward(StepRows{{5, 5, 6}, {{slot, 0, 1}, {spare, 1, 2}}, {1, 2}},
                  logits.data())
            .ok());
    EXPECT_EQ(arena.Snapshot(spare), arena.Snapshot(fresh));
    // Round 4, after one taken whole, skips the catch-up (the state is in
    // `spare` now, `slot` the spare): unfed [3], draft [4, 41] rejected at
    // 41, the model's own token 2.
    arena.CopySlot(slot, spare);
    ASSERT_TRUE(m.Forward(StepRows{{3, 4, 41}, {{slot, 0, 3}}, {0, 1, 2}},
                          logits.data())
                    .ok());
    // Round 5: unfed [3, 4, 2], caught up on in three rows beside a draft.
    for (int32_t t : {3, 4, 2}) {
      ASSERT_TRUE(
          m.Forward(StepRows{{t}, {{fresh, 0, 1}}, {0}}, logits.data()).ok());
    }
    arena.CopySlot(slot, spare);
    ASSERT_TRUE(m.Forward(StepRows{{3, 4, 2, 3, 4, 2, 11},
                                   {{spare, 0, 3}, {slot, 3, 4}},
                                   {5, 6}},
                          logits.data())
                    .ok());
    EXPECT_EQ(arena.Snapshot(spare), arena.Snapshot(fresh));
  }
}

}  // namespace
}  // namespace seqboat
