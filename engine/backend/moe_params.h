// The ops of a mixture-of-experts step that stays on the device: the routed
// (row, slot) pairs grouped by expert (MoeGroup), each expert's projection
// over its pairs (MoeGemm) and the pairs' outputs added into their rows
// (MoeCombine). A decode step launches the same ops whatever the routing,
// so it can be recorded once and replayed; the host-grouped path
// (GatherRows, per-expert Gemm, ScatterAddScaled) reads the routing back.
// Plain data, shared by both backends and the kernels, as dense_params.h.
#ifndef SEQBOAT_ENGINE_BACKEND_MOE_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_MOE_PARAMS_H_

#include <stdint.h>

#include "engine/backend/dense_params.h"
#include "engine/backend/hd.h"

namespace seqboat {

// The most experts a MoE block may have: the device grouping keeps two
// ints per expert in one block's shared memory. Configs with more are
// refused when they load, on every backend.
inline constexpr int kMoeMaxExperts = 4096;

// Pairs an expert's tile serves: the GEMV's batch, each weight loaded once
// for all of them.
inline constexpr int kMoeTileRows = 16;

// The tile table's length for n rows of `slots` slots and x experts: every
// expert with a pair has ceil(pairs / kMoeTileRows) tiles, at most
// min(n * slots, x) + n * slots / kMoeTileRows in all.
SEQBOAT_HD int MoeTileBound(int n, int slots, int x) {
  const int pairs = n * slots;
  return (pairs < x ? pairs : x) + pairs / kMoeTileRows;
}

// From experts / gates [n, slots] (ids outside [0, x) are no pair): the
// pairs sorted by (expert, row), their rows and gates, each (row, slot)'s
// pair (-1: none) and the tiles, each (expert, first pair, count <= 16),
// count 0 past the last. Outputs in the backend's memory; the arrays of
// pairs are n * slots long, tiles 3 * MoeTileBound ints.
struct MoeGroupParams {
  const int32_t* experts = nullptr;
  const float* gates = nullptr;
  int n = 0;
  int slots = 0;
  int x = 0;
  int32_t* pair_row = nullptr;
  float* pair_gate = nullptr;
  int32_t* pair_of = nullptr;
  int32_t* tiles = nullptr;
};

// y[p, :rows] = x[row(p), :cols] · W_e(p)ᵀ + bias_e(p) for every pair p of
// every tile, e(p) the tile's expert; row(p) = x_rows[p], or p itself with
// x_rows null (an input that is already one row per pair). `experts` is the
// backend's array of the x experts' matrices, all shaped and stored like
// `shape` (a host copy of one of them); bias [x, rows] or null. Rows of y
// that are no pair are left as they are.
struct MoeGemmParams {
  const float* x = nullptr;
  int ldx = 0;
  const int32_t* x_rows = nullptr;
  const Matrix* experts = nullptr;
  Matrix shape;
  const float* bias = nullptr;
  const int32_t* tiles = nullptr;
  int ntiles = 0;
  float* y = nullptr;
  int ldy = 0;
};

// For each row i < n: dst[i] = ScaledResidualAdd(dst[i], gate, src[p]) for
// its pairs p in increasing order (that is, increasing expert: the order in
// which the host-grouped path adds its experts), gate = pair_gate[p]. With
// pair_of null each row is its own pair and its gate is
// scale * sigmoid(gate_logits[i]) (a shared expert's gate).
struct MoeCombineParams {
  const float* src = nullptr;  // [pairs, d]
  int ldsrc = 0;
  const int32_t* pair_of = nullptr;  // [n, slots]
  const float* pair_gate = nullptr;
  int slots = 0;
  const float* gate_logits = nullptr;  // [n], with pair_of null
  float scale = 1.0f;
  int n = 0;
  int d = 0;
  float* dst = nullptr;
  int lddst = 0;
};

// A shared expert's gate: scale / (1 + e^-logit), as the host path computes it.
SEQBOAT_HD float SharedExpertGate(float scale, float logit) {
  return scale / (1.0f + expf(-logit));
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_MOE_PARAMS_H_
