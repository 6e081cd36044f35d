// The overlapped engine loop (Backend::PipelinesSteps: the next step is
// launched before the one in flight is read) against the synchronous one, on
// the CPU backend dressed as a pipelining device (PipelinedCpu): token for
// token the same generations for every block kind, greedy and seeded, n > 1,
// stop ids and strings, EOS, min_new_tokens, prefix reuse, cancel and
// deadline mid-flight and a failed step; no event after a final one.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/event_collector.h"
#include "engine/testing/flat_model.h"
#include "engine/testing/pipelined_cpu.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";
constexpr char kTinyHybrid[] = "tests/data/tiny_hybrid";
constexpr char kTinyGdn[] = "tests/data/tiny_gdn";

struct Spec {
  SamplingParams sampling;
  int32_t n = 1;
  int32_t max_new_tokens = 24;
  int32_t min_new_tokens = 0;
  bool ignore_eos = true;
  std::vector<int32_t> stop_token_ids;
  std::vector<std::string> stop_strings;
  int prompt_len = 5;
};

std::vector<int32_t> Prompt(int len, int salt) {
  std::vector<int32_t> p(len);
  for (int i = 0; i < len; ++i) p[i] = (i * 37 + salt * 11 + 5) % 256;
  return p;
}

// Greedy and seeded requests, with and without what keeps a sequence from
// running ahead of its pending token (min_new_tokens) and penalties (whose
// rows run ahead naming that token), of several lengths, some of n > 1,
// some free to stop at EOS.
std::vector<Spec> Mix() {
  std::vector<Spec> specs;
  const auto add = [&](float t, int k, float p, uint64_t seed) -> Spec& {
    Spec s;
    s.sampling.temperature = t;
    s.sampling.top_k = k;
    s.sampling.top_p = p;
    s.sampling.seed = seed;
    s.prompt_len = 3 + 5 * static_cast<int>(specs.size());
    s.max_new_tokens = 10 + 3 * static_cast<int>(specs.size() % 7);
    specs.push_back(s);
    return specs.back();
  };
  add(0.0f, 0, 1.0f, 0);
  add(1.0f, 0, 1.0f, 11);
  add(0.7f, 12, 0.9f, 12);
  add(0.0f, 0, 1.0f, 0).sampling.repetition_penalty = 1.4f;
  add(1.1f, 0, 1.0f, 13).sampling.presence_penalty = 0.8f;
  add(0.9f, 0, 1.0f, 14).n = 3;
  add(0.0f, 0, 1.0f, 0).n = 2;
  add(1.0f, 0, 0.8f, 15).ignore_eos = false;
  add(1.2f, 0, 1.0f, 16).min_new_tokens = 6;
  add(0.8f, 20, 1.0f, 17).max_new_tokens = 1;
  add(1.0f, 0, 1.0f, 18).max_new_tokens = 2;
  return specs;
}

// One request's sequences, in index order.
struct Outcome {
  std::vector<std::vector<int32_t>> tokens;
  std::vector<std::string> text;
  std::vector<FinishReason> finish;
  std::vector<int32_t> cached;
  bool bad = false;  // an event after a final one, or a bad index
};

struct Results {
  std::vector<Outcome> outcomes;
  int64_t launches = 0;  // pipelined launches (0 on the synchronous loop)
  int64_t rows_with_pending = 0;
  int32_t free_slots = -1;
};

EngineOptions Options(const std::string& model, int64_t cache_bytes) {
  EngineOptions o;
  o.model_dir = model;
  o.max_slots = 7;  // fewer than the sequences: some wait, batches vary
  o.step_token_budget = 20;
  o.prefix_cache_bytes = cache_bytes;
  return o;
}

Request MakeRequest(const Spec& s, int salt, EventCollector& c) {
  Request r;
  r.prompt = Prompt(s.prompt_len, salt);
  r.n = s.n;
  r.sampling = s.sampling;
  r.stopping.max_new_tokens = s.max_new_tokens;
  r.stopping.min_new_tokens = s.min_new_tokens;
  r.stopping.ignore_eos = s.ignore_eos;
  r.stopping.stop_token_ids = s.stop_token_ids;
  r.stopping.stop_strings = s.stop_strings;
  c.n = s.n;
  r.sink = c.Sink();
  return r;
}

Outcome OutcomeOf(EventCollector& c,
                  absl::StatusCode want = absl::StatusCode::kOk) {
  const GenerationEvent last = c.done.get_future().get();
  EXPECT_EQ(last.status.code(), want) << last.status;
  std::lock_guard<std::mutex> lock(c.mu);
  Outcome o;
  o.tokens = c.tokens_of;
  o.text = c.text_of;
  for (const GenerationEvent& e : c.final_of) {
    o.finish.push_back(e.finish);
    o.cached.push_back(e.cached_prompt_tokens);
  }
  o.bad = c.bad_index || c.after_final;
  return o;
}

// Runs the specs at once; `pipelined`: on PipelinedCpu, else the CPU
// backend's synchronous loop.
Results Generate(const std::string& model, const std::vector<Spec>& specs,
                 bool pipelined, int64_t cache_bytes = 0) {
  auto backend = pipelined ? std::make_unique<PipelinedCpu>() : nullptr;
  PipelinedCpu* device = backend.get();
  auto engine =
      Engine::Create(Options(model, cache_bytes),
                     pipelined ? std::unique_ptr<Backend>(std::move(backend))
                               : MakeCpuBackend(1));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  std::vector<std::unique_ptr<EventCollector>> collectors;
  for (size_t i = 0; i < specs.size(); ++i) {
    collectors.push_back(std::make_unique<EventCollector>());
    EXPECT_TRUE((*engine)
                    ->Submit(MakeRequest(specs[i], static_cast<int>(i),
                                         *collectors.back()))
                    .ok());
  }
  Results run;
  for (auto& c : collectors) run.outcomes.push_back(OutcomeOf(*c));
  run.launches = device != nullptr ? device->launches() : 0;
  run.rows_with_pending = device != nullptr ? device->rows_with_pending() : 0;
  (*engine)->Shutdown();
  run.free_slots = (*engine)->Stats().free_slots;
  return run;
}

void ExpectSame(const Results& want, const Results& got) {
  ASSERT_EQ(want.outcomes.size(), got.outcomes.size());
  for (size_t i = 0; i < want.outcomes.size(); ++i) {
    const Outcome& w = want.outcomes[i];
    const Outcome& g = got.outcomes[i];
    EXPECT_EQ(g.tokens, w.tokens) << "request " << i;
    EXPECT_EQ(g.text, w.text) << "request " << i;
    EXPECT_EQ(g.finish, w.finish) << "request " << i;
    EXPECT_FALSE(w.bad) << "request " << i;
    EXPECT_FALSE(g.bad) << "request " << i;
  }
}

TEST(EnginePipelineTest, GenerationsEqualTheSynchronousLoop) {
  const std::vector<Spec> specs = Mix();
  // The flat copies make seeded draws depend on every logit; tiny_hybrid
  // holds every block kind (and reads back to the host mid-step).
  for (const std::string& model :
       {std::string(kTinyMamba), FlatModelCopy(kTinyMamba),
        FlatModelCopy(kTinyHybrid), FlatModelCopy(kTinyGdn)}) {
    SCOPED_TRACE(model);
    const Results sync = Generate(model, specs, false);
    const Results piped = Generate(model, specs, true);
    ExpectSame(sync, piped);
    EXPECT_GT(piped.launches, 0);
    EXPECT_GT(piped.rows_with_pending, 0);  // penalised rows ran ahead
    EXPECT_EQ(piped.free_slots, 7);
  }
}

// Stop ids and stop strings found one step late: the extra token is
// dropped, never delivered.
TEST(EnginePipelineTest, StopsFoundOneStepLateDropTheExtraToken) {
  const std::string model = FlatModelCopy(kTinyMamba);
  std::vector<Spec> specs = Mix();
  for (Spec& s : specs) s.max_new_tokens = 30;
  const Results free_run = Generate(model, specs, false);
  for (size_t i = 0; i < specs.size(); ++i) {
    const auto& first = free_run.outcomes[i].tokens[0];
    const std::string& text = free_run.outcomes[i].text[0];
    if (i % 2 == 0 && first.size() > 6) {
      specs[i].stop_token_ids = {first[5]};
    } else if (text.size() > 8) {
      specs[i].stop_strings = {text.substr(4, 2)};
    }
  }
  const Results sync = Generate(model, specs, false);
  const Results piped = Generate(model, specs, true);
  ExpectSame(sync, piped);
  int stopped = 0;
  for (const Outcome& o : sync.outcomes) {
    for (FinishReason f : o.finish) {
      stopped += f == FinishReason::kEos || f == FinishReason::kStopString;
    }
  }
  EXPECT_GT(stopped, 4);  // the comparison covers early stops
}

// A second turn resumes from the first turn's snapshots the same way on
// both loops: its tokens are the same, and so are its cached prompt tokens
// where the first turn ended by length (a sequence stopped one step late
// has one more token in its snapshot).
TEST(EnginePipelineTest, PrefixReuseGivesTheSameSecondTurn) {
  const std::string model = FlatModelCopy(kTinyMamba);
  std::vector<Spec> first = Mix();
  for (Spec& s : first) s.n = 1;
  const Results turn1 = Generate(model, first, false, int64_t{1} << 28);
  std::vector<Spec> second = first;
  std::vector<std::vector<int32_t>> prompts;
  for (size_t i = 0; i < first.size(); ++i) {
    std::vector<int32_t> p = Prompt(first[i].prompt_len, static_cast<int>(i));
    const auto& out = turn1.outcomes[i].tokens[0];
    p.insert(p.end(), out.begin(), out.end());
    p.push_back(static_cast<int32_t>(40 + i));
    prompts.push_back(p);
  }
  const auto run_both_turns = [&](bool pipelined) {
    auto engine = Engine::Create(
        Options(model, int64_t{1} << 28),
        pipelined ? std::unique_ptr<Backend>(std::make_unique<PipelinedCpu>())
                  : MakeCpuBackend(1));
    EXPECT_TRUE(engine.ok()) << engine.status();
    std::vector<Outcome> out;
    for (int turn = 0; turn < 2; ++turn) {
      std::vector<std::unique_ptr<EventCollector>> cs;
      for (size_t i = 0; i < first.size(); ++i) {
        cs.push_back(std::make_unique<EventCollector>());
        Request r = MakeRequest(first[i], static_cast<int>(i), *cs.back());
        if (turn == 1) r.prompt = prompts[i];
        EXPECT_TRUE((*engine)->Submit(std::move(r)).ok());
      }
      for (auto& c : cs) out.push_back(OutcomeOf(*c));
    }
    return out;
  };
  const std::vector<Outcome> sync = run_both_turns(false);
  const std::vector<Outcome> piped = run_both_turns(true);
  ASSERT_EQ(sync.size(), 2 * first.size());
  ASSERT_EQ(piped.size(), sync.size());
  int resumed = 0;
  for (size_t i = 0; i < sync.size(); ++i) {
    EXPECT_EQ(piped[i].tokens, sync[i].tokens) << "outcome " << i;
    EXPECT_EQ(piped[i].finish, sync[i].finish) << "outcome " << i;
    if (i >= first.size() &&
        sync[i - first.size()].finish[0] == FinishReason::kLength) {
      EXPECT_EQ(piped[i].cached, sync[i].cached) << "outcome " << i;
      resumed += sync[i].cached[0] > first[i - first.size()].prompt_len;
    }
  }
  EXPECT_GT(resumed, 3);  // second turns resumed past their first prompt
}

// The same requests twice on one engine with a prefix cache: the first round
// snapshots at each prompt's end and forks n > 1 on the device, the second
// restores every prompt (and forks by restoring each slot) from host blocks.
// PipelinedCpu makes each copy late, so a step let onto a slot before its
// copy was done would change the tokens.
TEST(EnginePipelineTest, SlotCopiesOffTheOpStreamGiveTheSameTokens) {
  const std::vector<Spec> specs = Mix();
  for (const std::string& model :
       {FlatModelCopy(kTinyMamba), FlatModelCopy(kTinyHybrid),
        FlatModelCopy(kTinyGdn)}) {
    SCOPED_TRACE(model);
    const auto run = [&](bool pipelined, int64_t* deferred) {
      auto device = std::make_unique<PipelinedCpu>();
      PipelinedCpu* pipe = device.get();
      auto engine =
          Engine::Create(Options(model, int64_t{1} << 28),
                         pipelined ? std::unique_ptr<Backend>(std::move(device))
                                   : MakeCpuBackend(1));
      EXPECT_TRUE(engine.ok()) << engine.status();
      std::vector<Outcome> out;
      if (!engine.ok()) return out;
      for (int round = 0; round < 2; ++round) {
        std::vector<std::unique_ptr<EventCollector>> cs;
        for (size_t i = 0; i < specs.size(); ++i) {
          cs.push_back(std::make_unique<EventCollector>());
          EXPECT_TRUE((*engine)
                          ->Submit(MakeRequest(specs[i], static_cast<int>(i),
                                               *cs.back()))
                          .ok());
        }
        for (auto& c : cs) out.push_back(OutcomeOf(*c));
      }
      if (pipelined) *deferred = pipe->deferred_copies();
      (*engine)->Shutdown();
      EXPECT_EQ((*engine)->Stats().free_slots, 7);
      return out;
    };
    int64_t deferred = 0;
    const std::vector<Outcome> sync = run(false, &deferred);
    const std::vector<Outcome> piped = run(true, &deferred);
    ASSERT_EQ(sync.size(), 2 * specs.size());
    ASSERT_EQ(piped.size(), sync.size());
    for (size_t i = 0; i < sync.size(); ++i) {
      EXPECT_EQ(piped[i].tokens, sync[i].tokens) << "outcome " << i;
      EXPECT_EQ(piped[i].finish, sync[i].finish) << "outcome " << i;
      EXPECT_FALSE(piped[i].bad) << "outcome " << i;
      if (i >= specs.size()) {
        // Every second-round prompt resumed from its first round's snapshot.
        const int32_t len = specs[i - specs.size()].prompt_len;
        for (int32_t cached : piped[i].cached) EXPECT_EQ(cached, len - 1);
        EXPECT_EQ(piped[i].cached, sync[i].cached) << "outcome " << i;
      }
    }
    // Snapshots and restores all went through the late copies.
    EXPECT_GE(deferred, 2 * static_cast<int64_t>(specs.size()));
  }
}

// Cancel and deadline while a step holding the request is in flight: the
// others are untouched, the cancelled one ends once, its slot comes back.
TEST(EnginePipelineTest, CancelAndDeadlineMidFlight) {
  const std::string model = FlatModelCopy(kTinyMamba);
  const std::vector<Spec> specs = Mix();
  for (bool pipelined : {false, true}) {
    SCOPED_TRACE(pipelined ? "pipelined" : "synchronous");
    auto engine = Engine::Create(
        Options(model, 0),
        pipelined ? std::unique_ptr<Backend>(std::make_unique<PipelinedCpu>())
                  : MakeCpuBackend(1));
    ASSERT_TRUE(engine.ok()) << engine.status();
    std::vector<std::unique_ptr<EventCollector>> cs;
    std::vector<std::shared_ptr<RequestControl>> controls;
    for (size_t i = 0; i < specs.size(); ++i) {
      cs.push_back(std::make_unique<EventCollector>());
      Request r = MakeRequest(specs[i], static_cast<int>(i), *cs.back());
      r.stopping.max_new_tokens = 200;
      if (i == 1) {
        // Far more tokens than 30 ms give: the deadline ends it.
        r.stopping.max_new_tokens = 1 << 20;
        r.deadline = absl::Now() + absl::Milliseconds(30);
      }
      controls.push_back(r.control);
      // Request 2 is cancelled from its own sink after 4 tokens.
      if (i == 2) {
        auto inner = cs.back()->Sink();
        auto control = r.control;
        auto seen = std::make_shared<int>(0);
        r.sink = [inner, control, seen](GenerationEvent e) {
          *seen += static_cast<int>(e.token_ids.size());
          if (*seen >= 4) control->cancelled = true;
          inner(std::move(e));
        };
      }
      ASSERT_TRUE((*engine)->Submit(std::move(r)).ok());
    }
    for (size_t i = 0; i < cs.size(); ++i) {
      const Outcome o =
          OutcomeOf(*cs[i], i == 1 ? absl::StatusCode::kDeadlineExceeded
                                   : absl::StatusCode::kOk);
      EXPECT_FALSE(o.bad) << "request " << i;
      if (i == 2) {
        EXPECT_EQ(o.finish[0], FinishReason::kCancelled);
        EXPECT_GE(o.tokens[0].size(), 4u);
      }
    }
    (*engine)->Shutdown();
    EXPECT_EQ((*engine)->Stats().free_slots, 7);
  }
}

// PipelinedCpu whose launches fail from the k-th on: the requests running
// fail with its error, and the engine serves the next ones.
class FailingPipelinedCpu final : public PipelinedCpu {
 public:
  explicit FailingPipelinedCpu(std::atomic<int>* fail_from)
      : fail_from_(fail_from) {}
  absl::Status LaunchSampleRows(const SampleRowsParams& p) override {
    if (launches() + 1 >= fail_from_->load()) {
      fail_from_->store(1 << 30);  // once
      return absl::InternalError("injected launch failure");
    }
    return PipelinedCpu::LaunchSampleRows(p);
  }

 private:
  std::atomic<int>* fail_from_;
};

TEST(EnginePipelineTest, AFailedStepFailsItsRequestsOnly) {
  std::atomic<int> fail_from{6};
  auto engine =
      Engine::Create(Options(kTinyMamba, 0),
                     std::make_unique<FailingPipelinedCpu>(&fail_from));
  ASSERT_TRUE(engine.ok()) << engine.status();
  std::vector<Spec> specs = Mix();
  std::vector<std::unique_ptr<EventCollector>> cs;
  for (size_t i = 0; i < 4; ++i) {
    cs.push_back(std::make_unique<EventCollector>());
    specs[i].n = 1;
    specs[i].max_new_tokens = 40;
    ASSERT_TRUE(
        (*engine)
            ->Submit(MakeRequest(specs[i], static_cast<int>(i), *cs.back()))
            .ok());
  }
  int failed = 0;
  for (auto& c : cs) {
    const GenerationEvent last = c->done.get_future().get();
    failed += !last.status.ok();
    std::lock_guard<std::mutex> lock(c->mu);
    EXPECT_FALSE(c->after_final || c->bad_index);
  }
  EXPECT_GT(failed, 0);
  // The next request runs to its end.
  EventCollector after;
  ASSERT_TRUE((*engine)->Submit(MakeRequest(specs[0], 0, after)).ok());
  const GenerationEvent last = after.done.get_future().get();
  EXPECT_TRUE(last.status.ok()) << last.status;
  EXPECT_EQ(last.finish, FinishReason::kLength);
  (*engine)->Shutdown();
  EXPECT_EQ((*engine)->Stats().free_slots, 7);
}

}  // namespace
}  // namespace seqboat
