// The engine's device sampling path (Backend::SamplesOnDevice, then
// Model::ForwardSample and Sequence::Accept) on a CPU backend that claims to
// sample on its device and does so with the host Sampler: generations must be
// byte-identical to the ordinary host path, and requests with logprobs must
// keep the host path.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
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

// The CPU backend, forwarded op by op, except that it reports sampling on
// the device, counts the rows SampleRows draws, and offers capture buckets
// so decode steps are padded as on a GPU.
class DeviceSamplingCpu final : public ForwardingBackend {
 public:
  // Penalty table writes, and the ids whole lists would have carried.
  struct TableCounts {
    std::atomic<int64_t> writes{0}, listed{0};
  };
  explicit DeviceSamplingCpu(std::atomic<int64_t>* rows_sampled,
                             TableCounts* table = nullptr)
      : ForwardingBackend(MakeCpuBackend(1)),
        rows_sampled_(rows_sampled),
        table_(table) {}

  std::string name() const override { return "cpu-device-sampling"; }
  std::vector<int> CaptureBuckets(int max_slots) const override {
    std::vector<int> buckets;
    for (int b = 1; b <= max_slots; b *= 2) buckets.push_back(b);
    return buckets;
  }
  bool SamplesOnDevice() const override { return true; }
  absl::Status SampleRows(const SampleRowsParams& p) override {
    *rows_sampled_ += p.m;
    // The engine's rows index the penalty table: what it takes each call
    // against what whole lists would carry.
    if (table_ != nullptr) {
      table_->writes += p.table.write_count;
      for (int j = 0; j < p.m; ++j) {
        table_->listed += p.rows[j].seen_count + 2 * p.rows[j].counted_count +
                          p.rows[j].suppressed_count;
      }
    }
    return inner().SampleRows(p);
  }

 private:
  std::atomic<int64_t>* rows_sampled_;
  TableCounts* table_;
};

struct Spec {
  SamplingParams sampling;
  bool logprobs = false;
  bool ignore_eos = true;
  int32_t min_new_tokens = 0;
  std::vector<int32_t> stop_token_ids;
  int32_t max_new_tokens = 30;
  int32_t prompt_len = 0;  // 0: 3 + 7 * its index
};

// Greedy and seeded requests covering every filter and the penalties, alone
// and combined.
std::vector<Spec> Mix() {
  std::vector<Spec> specs;
  const auto add = [&](float t, int k, float p, float min_p, float penalty,
                       uint64_t seed) {
    Spec s;
    s.sampling.temperature = t;
    s.sampling.top_k = k;
    s.sampling.top_p = p;
    s.sampling.min_p = min_p;
    s.sampling.repetition_penalty = penalty;
    s.sampling.seed = seed;
    specs.push_back(s);
  };
  add(0.0f, 0, 1.0f, 0.0f, 1.0f, 0);     // greedy
  add(0.0f, 0, 1.0f, 0.0f, 1.6f, 0);     // greedy with a penalty
  add(1.0f, 1, 1.0f, 0.0f, 1.0f, 5);     // top-k 1: greedy
  add(1.0f, 0, 1.0f, 0.0f, 1.0f, 11);    // plain temperature
  add(0.7f, 12, 1.0f, 0.0f, 1.0f, 12);   // top-k
  add(1.2f, 0, 0.8f, 0.0f, 1.0f, 13);    // top-p
  add(1.0f, 0, 1.0f, 0.2f, 1.0f, 14);    // min-p
  add(0.9f, 0, 1.0f, 0.0f, 1.3f, 15);    // penalty
  add(1.1f, 40, 0.9f, 0.05f, 1.2f, 16);  // everything
  add(0.8f, 5, 0.6f, 0.0f, 0.8f, 17);    // penalty below 1 boosts
  specs.back().ignore_eos = false;
  // Presence and frequency penalties, greedy and sampled, with the
  // repetition penalty and negative.
  add(0.0f, 0, 1.0f, 0.0f, 1.0f, 0);
  specs.back().sampling.presence_penalty = 1.5f;
  specs.back().sampling.frequency_penalty = 0.5f;
  add(1.0f, 0, 1.0f, 0.0f, 1.2f, 18);
  specs.back().sampling.presence_penalty = -0.5f;
  specs.back().sampling.frequency_penalty = 1.0f;
  return specs;
}

std::vector<int32_t> Prompt(int len, int salt) {
  std::vector<int32_t> p(len);
  for (int i = 0; i < len; ++i) p[i] = (i * 37 + salt * 11 + 5) % 256;
  return p;
}

struct Outcome {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  size_t logprobs = 0;
};

// Runs every spec at once on one engine and returns each one's outcome.
std::vector<Outcome> Generate(const std::string& model_dir,
                              const std::vector<Spec>& specs,
                              std::unique_ptr<Backend> backend) {
  EngineOptions o;
  o.model_dir = model_dir;
  o.max_slots = 6;  // fewer than the requests: some wait, batches vary
  o.step_token_budget = 24;
  auto engine = Engine::Create(
      o, backend != nullptr ? std::move(backend) : MakeCpuBackend(1));
  EXPECT_TRUE(engine.ok()) << engine.status();
  if (!engine.ok()) return {};
  std::vector<std::unique_ptr<EventCollector>> collectors;
  for (size_t i = 0; i < specs.size(); ++i) {
    collectors.push_back(std::make_unique<EventCollector>());
    Request r;
    r.prompt = Prompt(specs[i].prompt_len > 0 ? specs[i].prompt_len
                                              : 3 + 7 * static_cast<int>(i),
                      static_cast<int>(i));
    r.sampling = specs[i].sampling;
    r.logprobs = specs[i].logprobs;
    r.top_logprobs = specs[i].logprobs ? 3 : 0;
    r.stopping.max_new_tokens = specs[i].max_new_tokens;
    r.stopping.ignore_eos = specs[i].ignore_eos;
    r.stopping.min_new_tokens = specs[i].min_new_tokens;
    r.stopping.stop_token_ids = specs[i].stop_token_ids;
    r.sink = collectors.back()->Sink();
    EXPECT_TRUE((*engine)->Submit(std::move(r)).ok());
  }
  std::vector<Outcome> out;
  for (auto& c : collectors) {
    const GenerationEvent last = c->done.get_future().get();
    EXPECT_TRUE(last.status.ok()) << last.status;
    std::lock_guard<std::mutex> lock(c->mu);
    out.push_back({c->tokens, c->text, last.finish, c->logprobs.size()});
  }
  return out;
}

void ExpectSameGenerations(const std::vector<Outcome>& want,
                           const std::vector<Outcome>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i].tokens, want[i].tokens) << "request " << i;
    EXPECT_EQ(got[i].text, want[i].text) << "request " << i;
    EXPECT_EQ(got[i].finish, want[i].finish) << "request " << i;
    EXPECT_FALSE(want[i].tokens.empty());
  }
}

int64_t TokenCount(const std::vector<Outcome>& outcomes) {
  int64_t n = 0;
  for (const Outcome& o : outcomes) n += static_cast<int64_t>(o.tokens.size());
  return n;
}

// The bundled tiny models mostly repeat their last token with logits so
// peaked that seeded sampling is as good as greedy; FlatModelCopy flattens
// them so that every draw matters (and the scale, which Forward applies to
// the host copy, must reach SampleRows).
std::string FlatCopy(const std::string& src) { return FlatModelCopy(src); }

TEST(EngineDeviceSamplingTest, GenerationsEqualTheHostPath) {
  const std::vector<Spec> specs = Mix();
  // tiny_hybrid reads back to the host mid-step, so its decode steps are
  // never padded; tiny_mamba's are.
  for (const std::string& model :
       {std::string(kTinyMamba), FlatCopy(kTinyMamba), FlatCopy(kTinyHybrid)}) {
    SCOPED_TRACE(model);
    const std::vector<Outcome> host = Generate(model, specs, nullptr);
    std::atomic<int64_t> rows{0};
    const std::vector<Outcome> device =
        Generate(model, specs, std::make_unique<DeviceSamplingCpu>(&rows));
    ExpectSameGenerations(host, device);
    // Every token came from SampleRows.
    EXPECT_EQ(rows.load(), TokenCount(device));
  }
}

// Long penalised generations (every penalty, greedy and seeded, stop ids
// held back by min_new_tokens, more requests than slots so that slots are
// reused) draw from the backend's penalty table as the host path draws from
// its own lists, and the table takes only what changed: about the prompt's
// ids once and a few ints a token, where whole lists would carry every id
// again at every step.
TEST(EngineDeviceSamplingTest, LongPenalisedGenerationsWriteOnlyWhatChanged) {
  std::vector<Spec> specs;
  for (int i = 0; i < 9; ++i) {
    Spec s;
    s.sampling.temperature = i % 3 == 0 ? 0.0f : 0.9f;
    s.sampling.seed = 100 + i;
    s.sampling.repetition_penalty = i % 2 == 0 ? 1.3f : 1.0f;
    s.sampling.presence_penalty = i % 3 == 1 ? 0.4f : 0.0f;
    s.sampling.frequency_penalty = i % 3 == 2 ? 0.6f : 0.0f;
    if (i == 4) s.sampling.repetition_penalty = 1.0f;  // none at all
    if (i % 4 == 1) {  // stops held back for 20 tokens, then live
      s.min_new_tokens = 20;
      s.stop_token_ids = {7, 9};
    }
    s.max_new_tokens = 150 + 20 * i;
    s.prompt_len = 60 + 25 * i;
    specs.push_back(s);
  }
  const std::string model = FlatCopy(kTinyMamba);
  const std::vector<Outcome> host = Generate(model, specs, nullptr);
  std::atomic<int64_t> rows{0};
  DeviceSamplingCpu::TableCounts table;
  const std::vector<Outcome> device = Generate(
      model, specs, std::make_unique<DeviceSamplingCpu>(&rows, &table));
  const int64_t writes = table.writes.load(), listed = table.listed.load();
  ExpectSameGenerations(host, device);
  int64_t prompts = 0;
  for (const Spec& s : specs) prompts += s.prompt_len;
  const int64_t tokens = TokenCount(device);
  std::printf(
      "%lld prompt ids, %lld tokens: %lld table writes, %lld ids in "
      "whole lists\n",
      static_cast<long long>(prompts), static_cast<long long>(tokens),
      static_cast<long long>(writes), static_cast<long long>(listed));
  EXPECT_GT(tokens, 1000);
  EXPECT_LE(writes, 2 * prompts + 3 * tokens + 64 * 9);
  EXPECT_LT(writes * 10, listed) << writes << " writes, " << listed;
}

// The flat copies make the comparison above mean something: seeded requests
// draw many different tokens there, and other tokens than unscaled.
TEST(EngineDeviceSamplingTest, FlatModelsSampleForReal) {
  const std::vector<Spec> specs = Mix();
  const std::vector<Outcome> peaked = Generate(kTinyMamba, specs, nullptr);
  const std::vector<Outcome> flat =
      Generate(FlatCopy(kTinyMamba), specs, nullptr);
  ASSERT_EQ(flat.size(), specs.size());
  // The seeded ones of the first ten but the tenth, which may stop early at
  // EOS (the penalised ones after it decide less by the logits' scale).
  for (size_t i = 3; i < 9; ++i) {
    const std::set<int32_t> distinct(flat[i].tokens.begin(),
                                     flat[i].tokens.end());
    EXPECT_GT(distinct.size(), 3u) << "request " << i;
    EXPECT_NE(flat[i].tokens, peaked[i].tokens) << "request " << i;
  }
}

// min_new_tokens holds EOS and the stop ids back through SampleRows as on
// the host: the stop ids are tokens each request draws early without it.
TEST(EngineDeviceSamplingTest, MinNewTokensHoldsTheStopIdsBackOnBothPaths) {
  const std::string model = FlatCopy(kTinyMamba);
  std::vector<Spec> specs = Mix();
  for (Spec& s : specs) s.ignore_eos = false;
  const std::vector<Outcome> free = Generate(model, specs, nullptr);
  constexpr int32_t kMin = 12;
  for (size_t i = 0; i < specs.size(); ++i) {
    ASSERT_GE(free[i].tokens.size(), 2u) << "request " << i;
    specs[i].stop_token_ids = {free[i].tokens[0], free[i].tokens[1]};
    specs[i].min_new_tokens = kMin;
  }
  const std::vector<Outcome> host = Generate(model, specs, nullptr);
  std::atomic<int64_t> rows{0};
  const std::vector<Outcome> device =
      Generate(model, specs, std::make_unique<DeviceSamplingCpu>(&rows));
  ExpectSameGenerations(host, device);
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::vector<int32_t>& t = host[i].tokens;
    ASSERT_GE(t.size(), static_cast<size_t>(kMin)) << "request " << i;
    for (int32_t k = 0; k < kMin; ++k) {
      EXPECT_NE(t[k], specs[i].stop_token_ids[0]) << i << " token " << k;
      EXPECT_NE(t[k], specs[i].stop_token_ids[1]) << i << " token " << k;
    }
  }
}

TEST(EngineDeviceSamplingTest, LogprobRequestsKeepTheHostPath) {
  std::vector<Spec> specs = Mix();
  specs[3].logprobs = true;
  specs[8].logprobs = true;
  const std::string model = FlatCopy(kTinyMamba);
  const std::vector<Outcome> host = Generate(model, specs, nullptr);
  std::atomic<int64_t> rows{0};
  const std::vector<Outcome> device =
      Generate(model, specs, std::make_unique<DeviceSamplingCpu>(&rows));
  ExpectSameGenerations(host, device);
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(device[i].logprobs,
              specs[i].logprobs ? device[i].tokens.size() : 0u)
        << "request " << i;
  }
  // Steps holding a logprob request sampled on the host; the others did not.
  EXPECT_GT(rows.load(), 0);
  EXPECT_LT(rows.load(), TokenCount(device));
}

}  // namespace
}  // namespace seqboat
