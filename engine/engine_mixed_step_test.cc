// Mixed steps through the whole engine: on a CPU backend that offers decode
// buckets and splits every mixed step (Backend::MixedStepGraphRows = 1), the
// one-row segments of steps that also carry prefill chunks go through
// RunCaptured; greedy and seeded generations must equal those of the same
// backend without buckets, token for token, on the synchronous loop (host
// sampling, speculative rounds) and the overlapped one (device sampling, fed
// rows).
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/block_slices.h"
#include "engine/testing/event_collector.h"
#include "engine/testing/flat_model.h"
#include "engine/testing/pipelined_cpu.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";
constexpr char kTinyQwenMtp[] = "tests/data/tiny_qwen3_5_mtp";

class PlainCpu : public ForwardingBackend {
 public:
  PlainCpu() : ForwardingBackend(MakeCpuBackend(1)) {}
};

struct CaptureCounts {
  std::atomic<int64_t> split{0};   // a mixed step's one-row pass
  std::atomic<int64_t> decode{0};  // a decode-only step
};

// `Base` with a GPU's buckets, splitting every mixed step, counting what it
// is asked to capture.
template <typename Base>
class Graphed final : public Base {
 public:
  explicit Graphed(CaptureCounts* counts) : counts_(counts) {}
  std::vector<int> CaptureBuckets(int max_slots) const override {
    std::vector<int> buckets;
    for (int b = 1; b < max_slots; b *= 2) buckets.push_back(b);
    buckets.push_back(max_slots);
    return buckets;
  }
  int MixedStepGraphRows() const override { return 1; }
  absl::Status RunCaptured(int64_t key,
                           const std::function<absl::Status()>& step) override {
    ++(key < 0 ? counts_->split : counts_->decode);
    return Base::RunCaptured(key, step);
  }

 private:
  CaptureCounts* counts_;
};

using Tokens = std::vector<std::vector<int32_t>>;

// Twelve requests on 8 slots with a 12-token step budget: prompts of 2 to
// 35 tokens are chunked beside other sequences' decode rows; half greedy,
// half seeded, one of n = 2.
// `rounds` (when set): the MTP rounds the engine counted.
Tokens Generate(const std::string& model, std::unique_ptr<Backend> backend,
                bool speculate = false, int64_t* rounds = nullptr) {
  EngineOptions o;
  o.model_dir = model;
  o.max_slots = 8;
  o.step_token_budget = 12;
  auto engine = Engine::Create(o, std::move(backend));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  std::vector<std::unique_ptr<EventCollector>> collectors;
  for (int i = 0; i < 12; ++i) {
    Request r;
    for (int j = 0; j < 2 + 3 * i; ++j) {
      r.prompt.push_back((j * 37 + i * 11 + 5) % 256);
    }
    r.n = i == 5 ? 2 : 1;
    if (i % 2 == 1) {
      r.sampling.temperature = 1.0f;
      r.sampling.seed = 100 + i;
    }
    r.stopping.max_new_tokens = 6 + (i * 5) % 13;
    r.stopping.ignore_eos = true;
    if (speculate) {
      r.speculative.method = SpeculativeMethod::kMtp;
      r.speculative.num_draft_tokens = 2;
    }
    collectors.push_back(std::make_unique<EventCollector>());
    collectors.back()->n = r.n;
    r.sink = collectors.back()->Sink();
    const absl::Status submitted = (*engine)->Submit(std::move(r));
    EXPECT_TRUE(submitted.ok()) << submitted;
  }
  Tokens out;
  for (auto& c : collectors) {
    const GenerationEvent last = c->done.get_future().get();
    EXPECT_TRUE(last.status.ok()) << last.status;
    std::lock_guard<std::mutex> lock(c->mu);
    for (const auto& t : c->tokens_of) out.push_back(t);
  }
  if (rounds != nullptr) {
    const EngineStats stats = (*engine)->Stats();
    auto it = stats.speculation_by_method.find("mtp");
    *rounds = it == stats.speculation_by_method.end() ? 0 : it->second.drafts;
  }
  (*engine)->Shutdown();
  return out;
}

std::vector<std::pair<std::string, std::string>> Models() {
  std::vector<std::pair<std::string, std::string>> models = {
      {"tiny_mamba", kTinyMamba},
      {"tiny_mamba flattened", FlatModelCopy(kTinyMamba)},
      {"tiny_qwen3_5_mtp flattened", FlatModelCopy(kTinyQwenMtp)}};
  // Mamba-2 and attention alone (tiny_hybrid's and tiny_gdn's other stacks
  // read back mid-step: they have no buckets).
  for (auto& [name, dir] : EachBlockKind({kTinyHybrid})) {
    if (name.rfind("mamba2", 0) == 0 || name.rfind("attention", 0) == 0) {
      models.emplace_back(name, dir);
    }
  }
  return models;
}

TEST(EngineMixedStepTest, SplitStepsGiveTheTokensOfOnePass) {
  for (const auto& [name, dir] : Models()) {
    SCOPED_TRACE(name);
    CaptureCounts counts;
    const Tokens want = Generate(dir, MakeCpuBackend(1));
    ASSERT_EQ(want.size(), 13u);
    EXPECT_EQ(Generate(dir, std::make_unique<Graphed<PlainCpu>>(&counts)),
              want);
    EXPECT_GT(counts.split.load(), 0);
    EXPECT_GT(counts.decode.load(), 0);
  }
}

TEST(EngineMixedStepTest, SplitStepsWithFedRowsGiveTheTokensOfOnePass) {
  for (const auto& [name, dir] : Models()) {
    SCOPED_TRACE(name);
    CaptureCounts counts;
    const Tokens want = Generate(dir, std::make_unique<PipelinedCpu>());
    ASSERT_EQ(want.size(), 13u);
    EXPECT_EQ(Generate(dir, std::make_unique<Graphed<PipelinedCpu>>(&counts)),
              want);
    EXPECT_GT(counts.split.load(), 0);
    EXPECT_GT(counts.decode.load(), 0);
  }
}

// Rounds of the model's MTP head: a round's slot row beside its spare's
// drafted rows, and the head fed the target's residual rows, which a split
// step must leave in step order.
TEST(EngineMixedStepTest, SplitStepsKeepSpeculativeRoundsExact) {
  const std::string dir = kTinyQwenMtp;  // its head is a file of its own
  CaptureCounts counts;
  const Tokens want = Generate(dir, MakeCpuBackend(1), true);
  ASSERT_EQ(want.size(), 13u);
  EXPECT_EQ(Generate(dir, MakeCpuBackend(1)), want);
  int64_t rounds = 0;
  EXPECT_EQ(Generate(dir, std::make_unique<Graphed<PlainCpu>>(&counts), true,
                     &rounds),
            want);
  EXPECT_GT(counts.split.load(), 0);
  EXPECT_GT(rounds, 0);
}

}  // namespace
}  // namespace seqboat
