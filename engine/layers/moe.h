// Mixture-of-experts block (MODELS.md §5, §6.2 `moe`, §13.4): r ← r +
// Σ_e g_e E_e(x) (+ the shared down.bias once) (+ s(x) E_shared(x)),
// x = Norm(r), E_e(x) = down_e(act(up_e x)) or down_e(act(gate_e x) ⊙ up_e x).
//
// Routing (one router op over all rows, then grouping by expert: on the
// host for prefill, on the device for decode calls; config parsing and the
// routing rules in moe_config.cc, the layer in moe.cc):
//   top1_softmax: softmax of the router logits in fp32; the top_k experts
//     (default 1) with gate = their full-softmax probability, so k = 1 is
//     Switch's y = p_i* E_i*(x); `renormalize` divides the chosen
//     probabilities by their sum (Mixtral-style top-k).
//   relu_dynamic (ReM §5.3): logits = router(SiLU(router_in x)); every expert
//     with ReLU(logit) > 0 runs, gate = that raw value.
//   sigmoid_group_topk (Nemotron-H, MODELS.md §14.3): s = sigmoid(logits);
//     s + moe.router.score_bias [X] (fp32) selects the top_k experts inside
//     the topk_group best of n_group groups; gate = s (renormalised by
//     `renormalize`).
// Every gate is then times routed_scale and the block's residual_scale.
// With `latent` L, the experts run in an L-wide space: their input is
// moe.latent_in x [L, D], their gated sum goes through moe.latent_out [D, L].
// The shared expert always reads x itself.
// Dispatch is batched: a step's rows are grouped by expert, each expert that
// was hit runs one GEMM per projection over all of its rows (gathered), and
// the results are scaled and scattered back. Never one GEMM per token.
#ifndef SEQBOAT_ENGINE_LAYERS_MOE_H_
#define SEQBOAT_ENGINE_LAYERS_MOE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/block.h"

namespace seqboat {

// Mixture of experts (§5). Dropless only: "capacity" must be null.
struct MoeConfig {
  MoeRouting routing = MoeRouting::kSoftmaxTopK;  // "top1_softmax"
  int64_t n_experts = 0;                          // X >= 1
  int64_t d_ff = 0;                               // F >= 1, per expert
  Activation act = Activation::kRelu;  // gelu, gelu_tanh, relu or silu
  bool gated = false;
  bool router_bias = false;  // router.bias (and router_in.bias)
  bool expert_bias = false;  // up.bias [X,F] (+ gate.bias), shared down.bias
  // top1_softmax only: experts per token (default 1, <= n_experts) and
  // whether their softmax probabilities are renormalised to sum to 1.
  int64_t top_k = 1;
  bool renormalize = false;
  int64_t router_hidden = 0;  // relu_dynamic only: h of router_in [h, D]
  // sigmoid_group_topk only: groups of n_experts / n_group experts, the
  // topk_group best of them searched (n_group <= 64, top_k experts fit).
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scale = 1.0;  // > 0; every routed gate times it
  int64_t latent = 0;         // L, or 0: the experts read x directly
  // config.json's optional "shared": {"d_ff": Fs, "gate": "sigmoid" or null},
  // an expert every row runs besides the routed ones, with the experts' act
  // and gating (moe.shared.{up,gate,down}.weight), its output times
  // sigmoid(moe.shared_gate.weight x) [1, D] when gated (Qwen3-Next,
  // Qwen3.5-MoE). 0: none.
  int64_t shared_d_ff = 0;
  bool shared_gate = false;
};

extern const BlockKind kMoeBlock;

// The (score_bias, n_group, topk_group) rules above, or INVALID_ARGUMENT
// naming what breaks them.
absl::Status CheckMoeRouting(const MoeConfig& config);

class MoeLayer : public Layer {
 public:
  // What the last Forward dispatched.
  struct StepStats {
    int experts_hit = 0;   // distinct experts with at least one row
    int expert_gemms = 0;  // GEMMs launched on expert weights
    int routed_rows = 0;   // (row, expert) pairs
    // A decode call's experts, grouped on the device: the host never saw
    // the routing, and the counts above stay 0.
    bool grouped_on_device = false;
  };
  virtual const StepStats& last_step() const = 0;
};

// Fetches `prefix` + "moe.*" (and the norm); shapes per §6.2. Its residual
// add is r + residual_scale·(routed + shared); a shared down.bias
// (expert_bias) is refused with residual_scale ≠ 1.
absl::StatusOr<std::unique_ptr<MoeLayer>> MakeMoe(
    const MoeConfig& config, const std::optional<NormConfig>& norm, int d_model,
    const std::string& prefix, WeightStore& weights, Backend& backend,
    float residual_scale = 1.0f);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_MOE_H_
