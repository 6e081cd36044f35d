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

// One row of a MoE router over x experts.
//   logits: the row's router outputs.
//   slots:  entries of `experts`/`gates` for this row: top_k for kSoftmaxTopK,
//           x for kReluDynamic. Unused entries get expert -1, gate 0.
// kSoftmaxTopK picks the top_k largest probabilities, ties to the lower
// expert index (torch.argmax / topk keep the first maximum). The gate is the
// full-softmax probability (Switch: y = p_i* E_i*(x)); with `renormalize`
// the chosen probabilities are divided by their sum (Mixtral-style top-k).
// kReluDynamic lists experts in index order.
SEQBOAT_HD void RouteRow(const float* logits, int x, MoeRouting routing,
                         int top_k, bool renormalize, int32_t* experts,
                         float* gates) {
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
    return;
  }
  float max_logit = logits[0];
  for (int e = 1; e < x; ++e) max_logit = fmaxf(max_logit, logits[e]);
  float sum = 0.0f;
  for (int e = 0; e < x; ++e) sum += expf(logits[e] - max_logit);
  // Selection by repeated argmax over the logits (softmax is monotone), each
  // pass skipping what earlier passes took; top_k is small.
  float chosen_sum = 0.0f;
  for (int j = 0; j < top_k; ++j) {
    int best = -1;
    for (int e = 0; e < x; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || experts[i] == e;
      if (taken) continue;
      if (best < 0 || logits[e] > logits[best]) best = e;
    }
    experts[j] = best;
    gates[j] = expf(logits[best] - max_logit) / sum;
    chosen_sum += gates[j];
  }
  if (renormalize) {
    for (int j = 0; j < top_k; ++j) gates[j] /= chosen_sum;
  }
}

}  // namespace seqboat::op_math

#endif  // SEQBOAT_ENGINE_BACKEND_FFN_MATH_H_
