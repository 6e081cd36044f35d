#include "engine/engine.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <mutex>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "engine/backend/testing/forwarding_backend.h"
#include "engine/testing/event_collector.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";

Request Greedy(std::vector<int32_t> prompt, int max_new, EventCollector& c) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stopping.max_new_tokens = max_new;
  r.stopping.ignore_eos = true;
  r.sink = c.Sink();
  return r;
}

std::vector<int32_t> Prompt(int len, int salt) {
  std::vector<int32_t> p(len);
  for (int i = 0; i < len; ++i) p[i] = (i * 31 + salt * 7 + 3) % 256;
  return p;
}

EngineOptions Options(int slots, int budget, int queue = 64,
                      const char* model = kTinyMamba) {
  EngineOptions o;
  o.model_dir = model;
  o.max_slots = slots;
  o.max_queue = queue;
  o.step_token_budget = budget;
  return o;
}

std::unique_ptr<Engine> MakeEngine(int slots, int budget, int queue = 64,
                                   const char* model = kTinyMamba) {
  auto engine =
      Engine::Create(Options(slots, budget, queue, model), MakeCpuBackend(1));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

TEST(EngineTest, GreedyOutputIsTheSameAloneOrAmongSixteen) {
  const std::vector<int32_t> target = Prompt(23, 0);
  std::vector<int32_t> alone;
  {
    EventCollector c;  // outlives the engine, whose thread calls its sink
    auto engine = MakeEngine(17, 16);
    ASSERT_TRUE(engine->Submit(Greedy(target, 48, c)).ok());
    GenerationEvent last = c.done.get_future().get();
    EXPECT_EQ(last.finish, FinishReason::kLength);
    EXPECT_EQ(last.generated_tokens, 48);
    alone = c.tokens;
  }
  ASSERT_EQ(alone.size(), 48u);
  // Same request among 16 others with different prompt lengths; the small
  // token budget forces chunked prefill interleaved with decodes.
  std::vector<std::unique_ptr<EventCollector>> others;
  EventCollector c;
  auto engine = MakeEngine(17, 16);
  for (int i = 0; i < 8; ++i) {
    others.push_back(std::make_unique<EventCollector>());
    ASSERT_TRUE(
        engine->Submit(Greedy(Prompt(5 + 9 * i, i + 1), 40 + i, *others.back()))
            .ok());
  }
  ASSERT_TRUE(engine->Submit(Greedy(target, 48, c)).ok());
  for (int i = 8; i < 16; ++i) {
    others.push_back(std::make_unique<EventCollector>());
    ASSERT_TRUE(
        engine
            ->Submit(Greedy(Prompt(1 + 13 * i, i + 1), 30 + i, *others.back()))
            .ok());
  }
  c.done.get_future().get();
  EXPECT_EQ(c.tokens, alone);
  for (auto& o : others) {
    GenerationEvent last = o->done.get_future().get();
    EXPECT_EQ(last.finish, FinishReason::kLength);
  }
}

// Every block kind in one stack: batching invariance holds, and the engine
// reports how often the SeqBoat block's attention unit ran.
TEST(EngineTest, HybridStackIsBatchInvariantAndReportsGauActivation) {
  constexpr char kTinyHybrid[] = "tests/data/tiny_hybrid";
  const std::vector<int32_t> target = Prompt(40, 9);
  std::vector<int32_t> alone;
  {
    EventCollector c;
    auto engine = MakeEngine(9, 16, 64, kTinyHybrid);
    ASSERT_TRUE(engine->Submit(Greedy(target, 40, c)).ok());
    c.done.get_future().get();
    alone = c.tokens;
  }
  std::vector<std::unique_ptr<EventCollector>> others;
  EventCollector c;
  auto engine = MakeEngine(9, 16, 64, kTinyHybrid);
  for (int i = 0; i < 8; ++i) {
    others.push_back(std::make_unique<EventCollector>());
    ASSERT_TRUE(
        engine->Submit(Greedy(Prompt(3 + 11 * i, i), 30, *others.back())).ok());
    if (i == 3) {
      ASSERT_TRUE(engine->Submit(Greedy(target, 40, c)).ok());
    }
  }
  c.done.get_future().get();
  EXPECT_EQ(c.tokens, alone);
  for (auto& o : others) o->done.get_future().get();
  engine->Shutdown();  // counters are published after each step; take the last

  int64_t tokens = -1, activated = -1;
  for (const BlockCounter& counter : engine->Stats().block_counters) {
    if (counter.block != 1) continue;  // the SeqBoat block
    if (counter.name == "seqboat.tokens") tokens = counter.value;
    if (counter.name == "seqboat.gau_activated") activated = counter.value;
  }
  // Every prompt and generated token went through the block; some, not all,
  // ran the attention unit.
  int64_t expected = 40 + 40 - 1;
  for (int i = 0; i < 8; ++i) expected += 3 + 11 * i + 30 - 1;
  EXPECT_EQ(tokens, expected);
  EXPECT_GT(activated, 0);
  EXPECT_LT(activated, tokens);
}

TEST(EngineTest, SameSeedSameTextAndTokensStream) {
  std::vector<int32_t> runs[2];
  EventCollector collectors[2];
  auto engine = MakeEngine(4, 64);
  int i = 0;
  for (auto& run : runs) {
    EventCollector& c = collectors[i++];
    Request r = Greedy(Prompt(10, 3), 20, c);
    r.sampling.temperature = 0.9f;
    r.sampling.top_p = 0.95f;
    r.sampling.seed = 1234;
    ASSERT_TRUE(engine->Submit(std::move(r)).ok());
    c.done.get_future().get();
    // Tokens stream as sampled; the delivery thread joins those that piled up
    // while a sink ran (EventOutbox), so there may be fewer events than tokens.
    EXPECT_EQ(c.tokens.size(), 20u);
    EXPECT_GE(c.events, 1);
    EXPECT_LE(c.events, 20);
    run = c.tokens;
  }
  EXPECT_EQ(runs[0], runs[1]);
}

TEST(EngineTest, QueueBoundGivesResourceExhausted) {
  std::vector<std::unique_ptr<EventCollector>> cs;
  auto engine = MakeEngine(1, 8, /*queue=*/2);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 12; ++i) {
    cs.push_back(std::make_unique<EventCollector>());
    absl::Status s = engine->Submit(Greedy(Prompt(4, i), 200, *cs.back()));
    if (s.ok()) {
      ++accepted;
    } else {
      EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
      ++refused;
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_LE(
      accepted,
      1 + 2 + 1);  // a slot, the queue, and one admitted meanwhile at most
  engine->Shutdown();
  // Shutdown ends every accepted request with exactly one final event.
  int finished = 0;
  for (auto& c : cs) {
    auto f = c->done.get_future();
    if (f.wait_for(std::chrono::seconds(0)) == std::future_status::ready)
      ++finished;
  }
  EXPECT_EQ(finished, accepted);
  EXPECT_EQ(engine->Stats().running, 0);
}

TEST(EngineTest, MoreRequestsThanSlotsAllFinishWithinTheSlots) {
  std::vector<std::unique_ptr<EventCollector>> cs;
  auto engine = MakeEngine(2, 8, /*queue=*/8);
  // Submitted at once: admission must take only as many as there are slots.
  for (int i = 0; i < 10; ++i) {
    cs.push_back(std::make_unique<EventCollector>());
    ASSERT_TRUE(engine->Submit(Greedy(Prompt(3 + i, i), 6, *cs.back())).ok());
    EXPECT_LE(engine->Stats().running, 2);
  }
  for (auto& c : cs) {
    GenerationEvent last = c->done.get_future().get();
    EXPECT_TRUE(last.status.ok()) << last.status;
    EXPECT_EQ(last.finish, FinishReason::kLength);
    EXPECT_EQ(c->tokens.size(), 6u);
  }
  EXPECT_EQ(engine->Stats().free_slots, 2);
}

TEST(EngineTest, CancelFreesTheSlot) {
  EventCollector a, b;
  auto engine = MakeEngine(1, 8);
  Request ra = Greedy(Prompt(4, 1), 100000, a);
  auto control = ra.control;
  ASSERT_TRUE(engine->Submit(std::move(ra)).ok());
  ASSERT_TRUE(engine->Submit(Greedy(Prompt(4, 2), 5, b))
                  .ok());  // waits for the one slot
  control->cancelled = true;
  GenerationEvent last_a = a.done.get_future().get();
  EXPECT_EQ(last_a.finish, FinishReason::kCancelled);
  GenerationEvent last_b = b.done.get_future().get();
  EXPECT_EQ(last_b.finish, FinishReason::kLength);
  EXPECT_EQ(engine->Stats().free_slots, 1);
}

TEST(EngineTest, DrainRefusesNewWorkAndFinishesOld) {
  EventCollector a, b;
  auto engine = MakeEngine(2, 8);
  ASSERT_TRUE(engine->Submit(Greedy(Prompt(4, 1), 10, a)).ok());
  engine->BeginDrain();
  absl::Status s = engine->Submit(Greedy(Prompt(4, 2), 10, b));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(a.done.get_future().get().finish, FinishReason::kLength);
}

TEST(EngineTest, TokenIdsOutsideTheVocabularyAreRejected) {
  EventCollector c;
  auto engine = MakeEngine(2, 8);
  absl::Status s = engine->Submit(Greedy({1, 2, 9999}, 3, c));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt token 2"), std::string::npos) << s;
  // The limit is the smaller of the tokenizer's ids and the embedding's rows
  // (tiny_mamba pads its 257 byte-level ids to 264 rows).
  const PromptRules& rules = engine->summary().prompt_rules;
  EXPECT_EQ(rules.vocab_limit, std::min(engine->tokenizer().vocab_size(),
                                        engine->summary().vocab_size));
  EXPECT_LT(rules.vocab_limit, engine->summary().vocab_size);
  EXPECT_FALSE(rules.padding_id.has_value());
  EXPECT_TRUE(engine->Submit(Greedy({1, 2, rules.vocab_limit - 1}, 3, c)).ok());
  EXPECT_FALSE(engine->Submit(Greedy({1, 2, rules.vocab_limit}, 3, c)).ok());
}

TEST(EngineTest, ThePaddingIdIsRefusedInPrompts) {
  // tiny_mamba with embedding row 7 declared padding, as a fairseq
  // checkpoint declares row 1.
  const std::string dir = testing::TempDir() + "/padded_mamba";
  std::filesystem::create_directories(dir);
  for (const char* file : {"model.safetensors", "tokenizer.json"}) {
    std::filesystem::copy_file(
        std::string(kTinyMamba) + "/" + file, dir + "/" + file,
        std::filesystem::copy_options::overwrite_existing);
  }
  std::ifstream in(std::string(kTinyMamba) + "/config.json");
  std::string config((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
  const std::string null_pad = "\"padding_idx\": null";
  ASSERT_NE(config.find(null_pad), std::string::npos);
  config.replace(config.find(null_pad), null_pad.size(), "\"padding_idx\": 7");
  std::ofstream(dir + "/config.json") << config;

  EventCollector refused, served;
  auto engine =
      Engine::Create(Options(2, 8, 64, dir.c_str()), MakeCpuBackend(1));
  ASSERT_TRUE(engine.ok()) << engine.status();
  absl::Status s = (*engine)->Submit(Greedy({5, 6, 7, 8}, 3, refused));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt token 2 is the padding id 7"),
            std::string::npos)
      << s;
  ASSERT_TRUE((*engine)->Submit(Greedy({5, 6, 8}, 3, served)).ok());
  EXPECT_EQ(served.done.get_future().get().finish, FinishReason::kLength);
}

// The CPU backend whose steps fail while `fail` is set, as a device's would;
// with `lost`, Health() then also reports the device gone for good.
class FaultyCpu final : public ForwardingBackend {
 public:
  FaultyCpu(const std::atomic<bool>* fail, bool lost)
      : ForwardingBackend(MakeCpuBackend(1)), fail_(fail), lost_(lost) {}
  absl::Status TakeError() override {
    absl::Status s = inner().TakeError();
    if (s.ok() && fail_->load()) return absl::InternalError("injected fault");
    return s;
  }
  absl::Status Health() const override {
    if (lost_ && fail_->load()) return absl::UnavailableError("device lost");
    return absl::OkStatus();
  }

 private:
  const std::atomic<bool>* fail_;
  bool lost_;
};

std::unique_ptr<Engine> MakeFaultyEngine(const std::atomic<bool>* fail,
                                         bool lost) {
  auto engine =
      Engine::Create(Options(1, 8), std::make_unique<FaultyCpu>(fail, lost));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

TEST(EngineFaultTest, AFailedStepFailsItsRequestsAndServingGoesOn) {
  std::atomic<bool> fail{true};
  auto engine = MakeFaultyEngine(&fail, /*lost=*/false);
  EventCollector a, b;
  ASSERT_TRUE(engine->Submit(Greedy(Prompt(4, 1), 5, a)).ok());
  const GenerationEvent last_a = a.done.get_future().get();
  EXPECT_EQ(last_a.status.message(), "injected fault");
  fail = false;
  ASSERT_TRUE(engine->Submit(Greedy(Prompt(4, 2), 5, b)).ok());
  EXPECT_EQ(b.done.get_future().get().finish, FinishReason::kLength);
  EXPECT_EQ(b.tokens.size(), 5u);
  EXPECT_TRUE(engine->Stats().fault.empty());
  EXPECT_EQ(engine->Stats().free_slots, 1);
}

TEST(EngineFaultTest, ALostDeviceFailsEverythingAndRefusesNewWork) {
  std::atomic<bool> fail{false};
  auto engine = MakeFaultyEngine(&fail, /*lost=*/true);
  EventCollector running, queued, later;
  ASSERT_TRUE(engine->Submit(Greedy(Prompt(4, 1), 100000, running)).ok());
  while (true) {  // until it holds the only slot
    {
      std::lock_guard<std::mutex> lock(running.mu);
      if (running.events > 0) break;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(engine->Submit(Greedy(Prompt(4, 2), 5, queued)).ok());
  fail = true;
  EXPECT_EQ(running.done.get_future().get().status.message(), "injected fault");
  const GenerationEvent last_queued = queued.done.get_future().get();
  EXPECT_EQ(last_queued.status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(last_queued.status.message(), "device lost");
  EXPECT_TRUE(queued.tokens.empty());
  EXPECT_NE(engine->Stats().fault.find("device lost"), std::string::npos);
  const absl::Status refused = engine->Submit(Greedy(Prompt(4, 3), 5, later));
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(refused.message(), "device lost");
}

}  // namespace
}  // namespace seqboat
