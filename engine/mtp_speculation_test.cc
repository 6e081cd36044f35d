// Speculation by the model's MTP head (tests/data/tiny_qwen3_5_mtp, a tiny
// Qwen3.5 with a random head) changes nothing of the output: greedy and
// seeded sampled requests give the tokens decoding without it gives, alone,
// several at once, under chunked prefill and prefix reuse; rounds run and are
// counted as "mtp". A head made to guess the target's own next token from
// the hidden row it is fed has exactly the acceptance that guess predicts,
// which holds only if each round reads the right rows. A model without a head
// refuses the method by name.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/engine.h"
#include "engine/model_dir/weight_store.h"
#include "engine/testing/event_collector.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "weights/safetensors_writer.h"

namespace seqboat {
namespace {

constexpr char kMtpModel[] = "tests/data/tiny_qwen3_5_mtp";

std::vector<int32_t> Prompt(int salt) {
  const std::string text =
      absl::StrCat("the cat sat on the mat ", salt, "; the cat sat on the");
  return std::vector<int32_t>(text.begin(), text.end());
}

struct Run {
  int draft_tokens = 0;  // 0: no speculation
  float temperature = 0;
  uint64_t seed = 0;
};

class MtpEngine {
 public:
  explicit MtpEngine(int budget, int64_t cache_bytes = 0,
                     const std::string& model = kMtpModel) {
    EngineOptions eo;
    eo.model_dir = model;
    eo.max_slots = 6;
    eo.step_token_budget = budget;
    eo.prefix_cache_bytes = cache_bytes;
    // Every round drafts its full room, as DraftsComeFromTheRightHiddenRows
    // simulates.
    eo.adaptive_draft_length = false;
    auto e = Engine::Create(eo, MakeCpuBackend(1));
    EXPECT_TRUE(e.ok()) << e.status();
    engine_ = *std::move(e);
  }
  ~MtpEngine() { engine_->Shutdown(); }

  Request Make(const std::vector<int32_t>& prompt, const Run& run,
               EventCollector& c) {
    Request r;
    r.prompt = prompt;
    r.sampling.temperature = run.temperature;
    r.sampling.seed = run.seed;
    r.stopping.max_new_tokens = 40;
    r.stopping.ignore_eos = true;
    if (run.draft_tokens > 0) {
      r.speculative.method = SpeculativeMethod::kMtp;
      r.speculative.num_draft_tokens = run.draft_tokens;
    }
    r.sink = c.Sink();
    return r;
  }

  // The requests' tokens, submitted together.
  std::vector<std::vector<int32_t>> Generate(
      const std::vector<std::vector<int32_t>>& prompts, const Run& run) {
    std::vector<std::unique_ptr<EventCollector>> cs;
    for (const auto& p : prompts) {
      cs.push_back(std::make_unique<EventCollector>());
      EXPECT_TRUE(engine_->Submit(Make(p, run, *cs.back())).ok());
    }
    std::vector<std::vector<int32_t>> out;
    for (auto& c : cs) {
      c->done.get_future().get();
      std::lock_guard<std::mutex> lock(c->mu);
      for (const GenerationEvent& f : c->final_of)
        EXPECT_TRUE(f.status.ok()) << f.status;
      out.push_back(c->tokens_of.at(0));
    }
    return out;
  }

  Engine& engine() { return *engine_; }

 private:
  std::unique_ptr<Engine> engine_;
};

void ExpectExact(int budget, const Run& run, int64_t cache_bytes = 0) {
  SCOPED_TRACE(absl::StrCat("budget ", budget, " k ", run.draft_tokens,
                            " temperature ", run.temperature));
  const std::vector<std::vector<int32_t>> prompts = {Prompt(1), Prompt(2),
                                                     Prompt(1)};
  Run plain = run;
  plain.draft_tokens = 0;
  MtpEngine base(budget);
  const auto want = base.Generate(prompts, plain);
  MtpEngine spec(budget, cache_bytes);
  // One alone, then all three at once (the third shares the first's prompt).
  EXPECT_EQ(spec.Generate({prompts[0]}, run)[0], want[0]);
  EXPECT_EQ(spec.Generate(prompts, run), want);
  const EngineStats stats = spec.engine().Stats();
  ASSERT_TRUE(stats.speculation_by_method.count("mtp"));
  const SpeculationCounts& c = stats.speculation_by_method.at("mtp");
  EXPECT_GT(c.drafts, 0);
  EXPECT_GT(c.draft_tokens, 0);
  EXPECT_LE(c.accepted_tokens, c.draft_tokens);
  std::printf("mtp k=%d budget %d: %lld rounds, %lld drafted, %lld taken\n",
              run.draft_tokens, budget, static_cast<long long>(c.drafts),
              static_cast<long long>(c.draft_tokens),
              static_cast<long long>(c.accepted_tokens));
}

TEST(MtpSpeculationTest, GreedyEqualsGreedyWithout) {
  ExpectExact(512, {3});
  ExpectExact(512, {1});
}

TEST(MtpSpeculationTest, ChunkedPrefillAndPrefixReuse) {
  ExpectExact(8, {4});
  ExpectExact(512, {2}, int64_t{64} << 20);
}

TEST(MtpSpeculationTest, SeededSamplingEqualsSamplingWithout) {
  ExpectExact(512, {3, 0.9f, 11});
}

// The tiny model with a head whose logits are the target's at the row it is
// fed: fc passes the hidden half only, its norm undoes the final norm's
// weight wf and the output norm puts it back (g = h), the layer adds nothing.
// Its drafts are the target's greedy token at the context's second-to-last
// position (the last token, in greedy decoding), repeated.
std::string EchoHeadModel() {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(std::getenv("TEST_TMPDIR")) / "echo_mtp";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    fs::copy_file(fs::path(kMtpModel) / f, dir / f,
                  fs::copy_options::overwrite_existing);
  auto ws = WeightStore::Open(std::string(kMtpModel) + "/model.safetensors");
  EXPECT_TRUE(ws.ok()) << ws.status();
  const int64_t d = 64, h = 4, hkv = 2, dh = 16, f = 96;
  auto wf = (*ws)->F32("final_norm.weight", {d});
  EXPECT_TRUE(wf.ok()) << wf.status();
  auto zeros = [](std::vector<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    return F32Tensor{shape, std::vector<float>(n, 0.0f)};
  };
  std::map<std::string, F32Tensor> t;
  F32Tensor fc = zeros({d, 2 * d}), undo = zeros({d}), redo = zeros({d});
  for (int64_t i = 0; i < d; ++i) {
    fc.data[i * 2 * d + d + i] = 1.0f;
    undo.data[i] = 1.0f / (*wf)[i] - 1.0f;  // stored w of a 1 + w norm
    redo.data[i] = (*wf)[i] - 1.0f;
  }
  t["mtp.fc.weight"] = fc;
  t["mtp.pre_fc_norm_embedding.weight"] = zeros({d});
  t["mtp.pre_fc_norm_hidden.weight"] = undo;
  t["mtp.norm.weight"] = redo;
  const std::string l = "mtp.layers.0.";
  t[l + "input_layernorm.weight"] = zeros({d});
  t[l + "post_attention_layernorm.weight"] = zeros({d});
  t[l + "self_attn.q_proj.weight"] = zeros({2 * h * dh, d});
  t[l + "self_attn.k_proj.weight"] = zeros({hkv * dh, d});
  t[l + "self_attn.v_proj.weight"] = zeros({hkv * dh, d});
  t[l + "self_attn.o_proj.weight"] = zeros({d, h * dh});
  t[l + "self_attn.q_norm.weight"] = zeros({dh});
  t[l + "self_attn.k_norm.weight"] = zeros({dh});
  t[l + "mlp.gate_proj.weight"] = zeros({f, d});
  t[l + "mlp.up_proj.weight"] = zeros({f, d});
  t[l + "mlp.down_proj.weight"] = zeros({d, f});
  EXPECT_TRUE(WriteF32Safetensors((dir / "mtp.safetensors").string(), t).ok());
  return dir.string();
}

TEST(MtpSpeculationTest, DraftsComeFromTheRightHiddenRows) {
  const std::string echo = EchoHeadModel();
  const int k = 3, max_new = 40;
  const std::vector<int32_t> prompt = Prompt(1);
  MtpEngine plain(512, 0, echo);
  const std::vector<int32_t> out = plain.Generate({prompt}, {})[0];
  ASSERT_EQ(static_cast<int>(out.size()), max_new);
  // The rounds that drafting [last token] * k gives, alone.
  int64_t rounds = 0, drafted = 0, accepted = 0;
  for (int g = 1; g < max_new;) {
    const int room = std::min(k, max_new - g - 1);
    if (room == 0) {
      ++g;
      continue;
    }
    int a = 0;
    while (a < room && out[g + a] == out[g - 1]) ++a;
    ++rounds;
    drafted += room;
    accepted += a;
    g += a + 1;
  }
  ASSERT_GT(accepted, 0);
  MtpEngine spec(512, 0, echo);
  EXPECT_EQ(spec.Generate({prompt}, {k})[0], out);
  const SpeculationCounts c =
      spec.engine().Stats().speculation_by_method.at("mtp");
  EXPECT_EQ(c.drafts, rounds);
  EXPECT_EQ(c.draft_tokens, drafted);
  EXPECT_EQ(c.accepted_tokens, accepted);
  std::printf("echo head k=%d: %lld rounds, %lld drafted, %lld taken\n", k,
              static_cast<long long>(c.drafts),
              static_cast<long long>(c.draft_tokens),
              static_cast<long long>(c.accepted_tokens));
}

TEST(MtpSpeculationTest, AModelWithoutAHeadRefusesTheMethod) {
  MtpEngine e(512, 0, "tests/data/tiny_gdn");
  EXPECT_FALSE(e.engine().summary().mtp_head);
  EventCollector c;
  const absl::Status s = e.engine().Submit(e.Make(Prompt(1), {2}, c));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("speculative method mtp"), std::string::npos) << s;
}

// A checkpoint that ships part of a head (tensors missing) still serves;
// only the method is refused.
TEST(MtpSpeculationTest, AHeadThatCannotLoadLeavesTheModelServingWithoutIt) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(std::getenv("TEST_TMPDIR")) / "partial_mtp";
  fs::create_directories(dir);
  for (const char* f : {"config.json", "model.safetensors", "tokenizer.json"})
    fs::copy_file(fs::path(kMtpModel) / f, dir / f,
                  fs::copy_options::overwrite_existing);
  std::map<std::string, F32Tensor> t;
  t["mtp.norm.weight"] = F32Tensor{{64}, std::vector<float>(64, 0.0f)};
  ASSERT_TRUE(WriteF32Safetensors((dir / "mtp.safetensors").string(), t).ok());
  MtpEngine e(512, 0, dir.string());
  EXPECT_FALSE(e.engine().summary().mtp_head);
  EventCollector c;
  const absl::Status s = e.engine().Submit(e.Make(Prompt(1), {2}, c));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Generate({Prompt(1)}, {})[0].size(), 40u);
}

}  // namespace
}  // namespace seqboat
