// Per-element math of the feed-forward kinds (mlp, moe) and of the S4D
// output gate: activations, and one row of a MoE router. Shared by the CPU
// loops and the CUDA kernels (SEQBOAT_HD).
#ifndef SEQBOAT_ENGINE_BACKEND_FFN_MATH_H_
#define SEQBOAT_ENGINE_BACKEND_FFN_MATH_H_

#include <math.h>
#include <stdint.h>

#include "engine/backend/hd.h"
#include "engine/backend/op_math.h"

namespace seqboat {

// Elementwise activations of the ActivateMul op.
enum class Activation : int32_t {
  kGelu,      // exact: x/2 (1 + erf(x/sqrt 2))   (torch GELU, minimal S4D)
  kGeluTanh,  // tanh approximation (gelu_new / gelu_pytorch_tanh)
  kRelu,
  kRelu2,  // squared ReLU, max(x, 0)^2 (Nemotron-H's MLPs)
  kSilu,
  kSigmoid,   // the gate half of a GLU
  kIdentity,  // plain copy / add
};

// How a MoE router turns its logits into (expert, gate) pairs (MODELS.md §5).
enum class MoeRouting : int32_t {
  // softmax over all experts in fp32, the top_k largest probabilities.
  kSoftmaxTopK,
  // ReM: every expert with a positive ReLU(logit), gate = that value.
  kReluDynamic,
  // Nemotron-H / DeepSeek-V3: sigmoid scores; a bias on the scores picks the
  // topk_group best groups (a group's score: the sum of its best two) and the
  // top_k experts inside them; the gates are the unbiased scores.
  kSigmoidGroupTopK,
};

// kSigmoidGroupTopK's settings beyond top_k (ignored by the other routings).
struct MoeGroupRouting {
  const float* score_bias = nullptr;  // [x], added to the scores to select
  int n_group = 1;                    // divides x; at most 64
  int topk_group = 1;                 // groups kept, <= n_group
};

}  // namespace seqboat

namespace seqboat::op_math {

SEQBOAT_HD float Activate(Activation act, float x) {
  switch (act) {
    case Activation::kGelu:
      return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Activation::kGeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + tanhf(inner));
    }
    case Activation::kRelu:
      return x > 0.0f ? x : 0.0f;
    case Activation::kRelu2: {
      const float r = x > 0.0f ? x : 0.0f;
      return r * r;
    }
    case Activation::kSilu:
      return Silu(x);
    case Activation::kSigmoid:
      return Sigmoid(x);
    case Activation::kIdentity:
      return x;
  }
  return x;
}

// The top_k largest of `score` (x entries, those of groups outside `keep`
// skipped; group g holds experts [g*gsize, (g+1)*gsize)) into experts[0..k),
// ties to the lower index (torch.argmax / topk keep the first maximum).
SEQBOAT_HD void TopKOf(const float* score, int x, int gsize, uint64_t keep,
                       int top_k, int32_t* experts) {
  for (int j = 0; j < top_k; ++j) {
    int best = -1;
    for (int e = 0; e < x; ++e) {
      if (((keep >> (e / gsize)) & 1u) == 0) continue;
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || experts[i] == e;
      if (taken) continue;
      if (best < 0 || score[e] > score[best]) best = e;
    }
    experts[j] = best;
  }
}

// kSigmoidGroupTopK for one row. Selection uses sigmoid(logit) + score_bias
// (computed twice rather than stored: x has no bound here); a group's score
// is the sum of its two best (one, for a group of one). Gates are the
// sigmoid scores, divided by their sum + 1e-20 when `renormalize`.
SEQBOAT_HD void RouteRowSigmoidGroup(const float* logits, int x, int top_k,
                                     bool renormalize,
                                     const MoeGroupRouting& group,
                                     int32_t* experts, float* gates) {
  const int n_group = group.n_group < 1 ? 1 : group.n_group;
  const int gsize = x / n_group;
  const float* bias = group.score_bias;
  uint64_t keep = 0;
  for (int pass = 0; pass < group.topk_group && pass < n_group; ++pass) {
    int best = -1;
    float best_score = 0.0f;
    for (int g = 0; g < n_group; ++g) {
      if ((keep >> g) & 1u) continue;
      float m1 = -INFINITY, m2 = -INFINITY;
      for (int e = g * gsize; e < (g + 1) * gsize; ++e) {
        const float c = Sigmoid(logits[e]) + (bias != nullptr ? bias[e] : 0.0f);
        if (c > m1) {
          m2 = m1;
          m1 = c;
        } else if (c > m2) {
          m2 = c;
        }
      }
      const float score = gsize > 1 ? m1 + m2 : m1;
      if (best < 0 || score > best_score) {
        best = g;
        best_score = score;
      }
    }
    keep |= uint64_t{1} << best;
  }
  // The top_k of the kept groups by the biased score (TopKOf's rule, on a
  // score recomputed per expert rather than stored).
  for (int j = 0; j < top_k; ++j) {
    int best = -1;
    float best_c = 0.0f;
    for (int e = 0; e < x; ++e) {
      if (((keep >> (e / gsize)) & 1u) == 0) continue;
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || experts[i] == e;
      if (taken) continue;
      const float c = Sigmoid(logits[e]) + (bias != nullptr ? bias[e] : 0.0f);
      if (best < 0 || c > best_c) {
        best = e;
        best_c = c;
      }
    }
    experts[j] = best;
  }
  float sum = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    gates[j] = experts[j] < 0 ? 0.0f : Sigmoid(logits[experts[j]]);
    sum += gates[j];
  }
  if (renormalize) {
    for (int j = 0; j < top_k; ++j) gates[j] /= sum + 1e-20f;
  }
}

// One row of a MoE router over x experts.
//   logits: the row's router outputs.
//   slots:  entries of `experts`/`gates` for this row: top_k for kSoftmaxTopK
//           and kSigmoidGroupTopK, x for kReluDynamic. Unused entries get
//           expert -1, gate 0.
// kSoftmaxTopK picks the top_k largest probabilities, ties to the lower
// expert index (torch.argmax / topk keep the first maximum). The gate is the
// full-softmax probability (Switch: y = p_i* E_i*(x)); with `renormalize`
// the chosen probabilities are divided by their sum (Mixtral-style top-k).
// kReluDynamic lists experts in index order. Every gate is then multiplied
// by `scale` (Nemotron-H's routed_scaling_factor; a block's residual_scale).
SEQBOAT_HD void RouteRow(const float* logits, int x, MoeRouting routing,
                         int top_k, bool renormalize, float scale,
                         const MoeGroupRouting& group, int32_t* experts,
                         float* gates) {
  const int slots = routing == MoeRouting::kReluDynamic ? x : top_k;
  if (routing == MoeRouting::kReluDynamic) {
    int used = 0;
    for (int e = 0; e < x; ++e) {
      if (logits[e] > 0.0f) {
        experts[used] = e;
        gates[used] = logits[e];
        ++used;
      }
    }
    for (int j = used; j < x; ++j) {
      experts[j] = -1;
      gates[j] = 0.0f;
    }
  } else if (routing == MoeRouting::kSigmoidGroupTopK) {
    RouteRowSigmoidGroup(logits, x, top_k, renormalize, group, experts, gates);
  } else {
    float max_logit = logits[0];
    for (int e = 1; e < x; ++e) max_logit = fmaxf(max_logit, logits[e]);
    float sum = 0.0f;
    for (int e = 0; e < x; ++e) sum += expf(logits[e] - max_logit);
    // Selection by repeated argmax over the logits (softmax is monotone).
    TopKOf(logits, x, x, 1, top_k, experts);
    float chosen_sum = 0.0f;
    for (int j = 0; j < top_k; ++j) {
      gates[j] = expf(logits[experts[j]] - max_logit) / sum;
      chosen_sum += gates[j];
    }
    if (renormalize) {
      for (int j = 0; j < top_k; ++j) gates[j] /= chosen_sum;
    }
  }
  if (scale != 1.0f) {
    for (int j = 0; j < slots; ++j) gates[j] *= scale;
  }
}

}  // namespace seqboat::op_math

#endif  // SEQBOAT_ENGINE_BACKEND_FFN_MATH_H_
