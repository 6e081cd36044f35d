// The engine on the CUDA backend (device sampling, recorded decode steps,
// continuous batching) generates what the CPU engine generates: greedy
// continuations of 128 tokens of the bundled models, several requests at
// once so batches grow, shrink and pad to buckets.
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "engine/engine.h"
#include "engine/testing/event_collector.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/cuda_backend.h"

namespace seqboat {
namespace {

// Five greedy requests with prompts of different lengths, 128 new tokens
// each; returns their tokens and texts.
std::vector<std::pair<std::vector<int32_t>, std::string>> Greedy(
    const std::string& model, const std::string& backend) {
  EngineOptions o;
  o.model_dir = model;
  o.max_slots = 4;  // fewer than the requests: one waits
  o.step_token_budget = 32;
  std::unique_ptr<Backend> be;
  if (backend == "cuda") {
    CudaBackendOptions cuda;
    cuda.weights = CudaWeights::kF32;
    auto made = MakeCudaBackend(cuda);
    EXPECT_TRUE(made.ok()) << made.status();
    if (!made.ok()) return {};
    be = *std::move(made);
  } else {
    be = MakeCpuBackend(0);
  }
  auto engine = Engine::Create(o, std::move(be));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  EXPECT_EQ((*engine)->summary().backend, backend);
  std::vector<std::unique_ptr<EventCollector>> collectors;
  for (int i = 0; i < 5; ++i) {
    collectors.push_back(std::make_unique<EventCollector>());
    Request r;
    for (int j = 0; j < 5 + 9 * i; ++j) r.prompt.push_back((j * 31 + i) % 256);
    r.sampling.temperature = 0.0f;
    r.stopping.max_new_tokens = 128;
    r.stopping.ignore_eos = true;
    r.sink = collectors.back()->Sink();
    EXPECT_TRUE((*engine)->Submit(std::move(r)).ok());
  }
  std::vector<std::pair<std::vector<int32_t>, std::string>> out;
  for (auto& c : collectors) {
    const GenerationEvent last = c->done.get_future().get();
    EXPECT_TRUE(last.status.ok()) << last.status;
    std::lock_guard<std::mutex> lock(c->mu);
    EXPECT_EQ(c->tokens.size(), 128u);
    out.push_back({c->tokens, c->text});
  }
  return out;
}

TEST(EngineGpuTest, GreedyGenerationsEqualTheCpuEngine) {
  for (const char* model :
       {"weights/models/default", "weights/models/mamba-baseline"}) {
    const auto cpu = Greedy(model, "cpu");
    const auto cuda = Greedy(model, "cuda");
    ASSERT_EQ(cpu.size(), cuda.size());
    for (size_t i = 0; i < cpu.size(); ++i) {
      EXPECT_EQ(cpu[i].first, cuda[i].first) << model << " request " << i;
      EXPECT_EQ(cpu[i].second, cuda[i].second) << model << " request " << i;
    }
  }
}

// Prefix reuse on the device: snapshots copied out of and back into device
// state slots give a second turn the tokens a cold start gives.
TEST(EngineGpuTest, SecondTurnFromASnapshotEqualsAColdStart) {
  auto make = [](const std::string& model, int64_t cache_bytes) {
    EngineOptions o;
    o.model_dir = model;
    o.max_slots = 2;
    o.step_token_budget = 16;
    o.prefix_cache_bytes = cache_bytes;
    CudaBackendOptions cuda;
    cuda.weights = CudaWeights::kF32;
    auto be = MakeCudaBackend(cuda);
    EXPECT_TRUE(be.ok()) << be.status();
    auto engine = Engine::Create(o, *std::move(be));
    EXPECT_TRUE(engine.ok()) << engine.status();
    return *std::move(engine);
  };
  auto run = [](Engine& engine, const std::vector<int32_t>& prompt) {
    EventCollector c;
    Request r;
    r.prompt = prompt;
    r.sampling.temperature = 0.0f;
    r.stopping.max_new_tokens = 24;
    r.stopping.ignore_eos = true;
    r.sink = c.Sink();
    EXPECT_TRUE(engine.Submit(std::move(r)).ok());
    const GenerationEvent last = c.done.get_future().get();
    EXPECT_TRUE(last.status.ok()) << last.status;
    std::lock_guard<std::mutex> lock(c.mu);
    return std::make_pair(c.tokens, last.cached_prompt_tokens);
  };
  for (const char* model :
       {"weights/models/default", "weights/models/mamba-baseline"}) {
    auto on = make(model, 256 << 20);
    auto off = make(model, 0);
    std::vector<int32_t> p1;
    for (int j = 0; j < 70; ++j) p1.push_back((j * 29 + 3) % 256);
    const auto t1 = run(*on, p1);
    std::vector<int32_t> p2 = p1;
    p2.insert(p2.end(), t1.first.begin(), t1.first.end());
    for (int j = 0; j < 20; ++j) p2.push_back((j * 13 + 1) % 256);
    const auto warm = run(*on, p2);
    EXPECT_EQ(warm.second, 70 + 24 - 1) << model;
    const auto cold = run(*off, p2);
    EXPECT_EQ(cold.second, 0);
    EXPECT_EQ(warm.first, cold.first) << model;
    on->Shutdown();
    off->Shutdown();
  }
}

}  // namespace
}  // namespace seqboat
