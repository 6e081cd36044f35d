// Requests of n > 1 sequences on a real model: the prompt is read once and
// its state copied into n slots, and sequence i then gives exactly the
// tokens of a request of one sequence seeded seed + i (both tiny models,
// flattened so that draws matter; chunked prefill; with and without the
// prefix cache; prompts of one token). Cancelling ends every sequence and
// frees every slot.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "engine/backend/testing/forwarding_backend.h"
#include "engine/engine.h"
#include "engine/testing/event_collector.h"
#include "engine/testing/flat_model.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";
constexpr char kTinyHybrid[] = "tests/data/tiny_hybrid";
// Gated DeltaNet, gated attention and a moe with a shared expert.
constexpr char kTinyGdn[] = "tests/data/tiny_gdn";

// The CPU backend, counting the rows the model embeds: every prompt token
// and every decode step it reads.
class RowCountingCpu final : public ForwardingBackend {
 public:
  explicit RowCountingCpu(std::atomic<int64_t>* rows)
      : ForwardingBackend(MakeCpuBackend(1)), rows_(rows) {}
  void Embed(const EmbedParams& p) override {
    *rows_ += p.n;
    inner().Embed(p);
  }

 private:
  std::atomic<int64_t>* rows_;
};

std::vector<int32_t> Prompt(int len) {
  std::vector<int32_t> p(len);
  for (int i = 0; i < len; ++i) p[i] = (i * 29 + 11) % 250 + 1;
  return p;
}

Request Sampled(int prompt_len, uint64_t seed, int max_new) {
  Request r;
  r.prompt = Prompt(prompt_len);
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.stopping.max_new_tokens = max_new;
  r.stopping.ignore_eos = true;
  return r;
}

std::unique_ptr<Engine> MakeEngine(const std::string& model, int64_t cache,
                                   std::atomic<int64_t>* rows) {
  EngineOptions o;
  o.model_dir = model;
  o.max_slots = 6;
  o.step_token_budget = 8;  // prompts arrive in chunks
  o.prefix_cache_bytes = cache;
  auto engine = Engine::Create(o, std::make_unique<RowCountingCpu>(rows));
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? *std::move(engine) : nullptr;
}

TEST(ForkTest, SequenceIEqualsARequestSeededSeedPlusI) {
  constexpr int kN = 4;
  constexpr int kNew = 16;
  for (const char* src : {kTinyMamba, kTinyHybrid, kTinyGdn}) {
    const std::string model = FlatModelCopy(src);
    for (int64_t cache : {int64_t{0}, int64_t{64} << 20}) {
      for (int len : {1, 2, 21}) {
        SCOPED_TRACE(testing::Message()
                     << src << " cache " << cache << " prompt " << len);
        const uint64_t seed = 1000 + len;
        // One request of n.
        std::atomic<int64_t> fork_rows{0};
        EventCollector forked;
        forked.n = kN;
        {
          auto engine = MakeEngine(model, cache, &fork_rows);
          ASSERT_NE(engine, nullptr);
          Request r = Sampled(len, seed, kNew);
          r.n = kN;
          r.sink = forked.Sink();
          ASSERT_TRUE(engine->Submit(std::move(r)).ok());
          forked.done.get_future().get();
          EXPECT_EQ(engine->Stats().free_slots, 6);
        }
        // n requests of one, seeded seed + i.
        std::atomic<int64_t> alone_rows{0};
        std::vector<std::unique_ptr<EventCollector>> alone;
        {
          auto engine = MakeEngine(model, cache, &alone_rows);
          ASSERT_NE(engine, nullptr);
          for (int i = 0; i < kN; ++i) {
            alone.push_back(std::make_unique<EventCollector>());
            Request r = Sampled(len, seed + i, kNew);
            r.sink = alone.back()->Sink();
            ASSERT_TRUE(engine->Submit(std::move(r)).ok());
          }
          for (auto& c : alone) c->done.get_future().get();
        }
        std::lock_guard<std::mutex> lock(forked.mu);
        EXPECT_FALSE(forked.bad_index);
        std::vector<std::vector<int32_t>> distinct;
        for (int i = 0; i < kN; ++i) {
          std::lock_guard<std::mutex> alone_lock(alone[i]->mu);
          EXPECT_EQ(forked.tokens_of[i], alone[i]->tokens) << "sequence " << i;
          EXPECT_EQ(forked.text_of[i], alone[i]->text) << "sequence " << i;
          const GenerationEvent& last = forked.final_of[i];
          EXPECT_EQ(last.finish, FinishReason::kLength);
          EXPECT_EQ(last.generated_tokens, kNew);
          EXPECT_EQ(last.prompt_tokens, len);
          distinct.push_back(forked.tokens_of[i]);
        }
        // The seeds make the sequences differ.
        EXPECT_NE(distinct[0], distinct[1]);
        EXPECT_NE(distinct[1], distinct[2]);
        // The prompt but its last token was read once, not n times; each
        // sequence reads the last prompt token and its own tokens.
        EXPECT_EQ(fork_rows.load(), (len - 1) + kN * kNew);
        if (cache == 0) {
          EXPECT_EQ(alone_rows.load(), kN * len + kN * (kNew - 1));
        }
      }
    }
  }
}

TEST(ForkTest, CancellingEndsEverySequenceAndFreesEverySlot) {
  std::atomic<int64_t> rows{0};
  auto engine = MakeEngine(kTinyMamba, 0, &rows);
  ASSERT_NE(engine, nullptr);
  // Cancelled at once (queued or reading its prompt), and after the fork.
  for (int prompt : {40, 3}) {
    EventCollector c;
    c.n = 5;
    Request r = Sampled(prompt, 7, 1000000);
    r.n = 5;
    r.sink = c.Sink();
    auto control = r.control;
    ASSERT_TRUE(engine->Submit(std::move(r)).ok());
    if (prompt == 3) {
      while (true) {
        {
          std::lock_guard<std::mutex> lock(c.mu);
          if (c.tokens.size() >= 10) break;
        }
        absl::SleepFor(absl::Milliseconds(1));
      }
    }
    control->cancelled = true;
    c.done.get_future().get();
    std::lock_guard<std::mutex> lock(c.mu);
    EXPECT_FALSE(c.bad_index);
    for (const GenerationEvent& e : c.final_of) {
      EXPECT_EQ(e.finish, FinishReason::kCancelled);
    }
    const EngineStats stats = engine->Stats();
    EXPECT_EQ(stats.free_slots, 6);
    EXPECT_EQ(stats.running, 0);
  }
}

TEST(ForkTest, NBeyondTheSlotsIsRefused) {
  std::atomic<int64_t> rows{0};
  auto engine = MakeEngine(kTinyMamba, 0, &rows);
  ASSERT_NE(engine, nullptr);
  EventCollector c;
  for (int n : {0, 7}) {
    Request r = Sampled(3, 1, 2);
    r.n = n;
    r.sink = c.Sink();
    const absl::Status s = engine->Submit(std::move(r));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << n;
    EXPECT_NE(s.message().find("n is"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace seqboat
