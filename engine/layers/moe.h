// Mixture-of-experts block (MODELS.md §5, §6.2 `moe`): r ← r + Σ_e g_e E_e(x)
// (+ the shared down.bias once), x = Norm(r), E_e(x) = down_e(act(up_e x))
// or down_e(act(gate_e x) ⊙ up_e x).
//
// Routing (one router op over all rows, then host-side grouping):
//   top1_softmax: softmax of the router logits in fp32; the top_k experts
//     (default 1) with gate = their full-softmax probability, so k = 1 is
//     Switch's y = p_i* E_i*(x); `renormalize` divides the chosen
//     probabilities by their sum (Mixtral-style top-k).
//   relu_dynamic (ReM §5.3): logits = router(SiLU(router_in x)); every expert
//     with ReLU(logit) > 0 runs, gate = that raw value.
// Dispatch is batched: a step's rows are grouped by expert, each expert that
// was hit runs one GEMM per projection over all of its rows (gathered), and
// the results are scaled and scattered back. Never one GEMM per token.
#ifndef SEQBOAT_ENGINE_LAYERS_MOE_H_
#define SEQBOAT_ENGINE_LAYERS_MOE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/layers/layer.h"
#include "engine/model/config.h"
#include "engine/model/weight_store.h"

namespace seqboat {

class MoeLayer : public Layer {
 public:
  // What the last Forward dispatched.
  struct StepStats {
    int experts_hit = 0;   // distinct experts with at least one row
    int expert_gemms = 0;  // GEMMs launched on expert weights
    int routed_rows = 0;   // (row, expert) pairs
  };
  virtual const StepStats& last_step() const = 0;
};

// Fetches `prefix` + "moe.*" (and the norm); shapes per §6.2.
absl::StatusOr<std::unique_ptr<MoeLayer>> MakeMoe(
    const MoeConfig& config, const std::optional<NormConfig>& norm, int d_model,
    const std::string& prefix, WeightStore& weights, Backend& backend);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_MOE_H_
