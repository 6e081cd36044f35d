// The arguments of the SeqBoat block's stateful ops (MODELS.md §2), defined
// once for the Backend virtuals, the CPU loops and the CUDA kernels, which
// receive them by value. Plain data, no absl: nvcc includes this header.
//
// Pointers are the backend's memory (device memory on CUDA); slot s's state
// region (seqboat_math.h SeqBoatSlot) is at state + s * state_stride bytes.
#ifndef SEQBOAT_ENGINE_BACKEND_SEQBOAT_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_SEQBOAT_PARAMS_H_

#include <stdint.h>

#include "engine/backend/segment.h"
#include "engine/backend/seqboat_shape.h"

namespace seqboat {

// MD-EMA over each segment's tokens: x [n, d] (normed input), coefficients
// g = in_coef, φ = decay, η = out_coef [d, ne], ω = skip [d];
// h [n, d] = SiLU(Σ η s + ω x).
struct SeqBoatEmaParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  const float* x = nullptr;  // [n, d]
  void* state = nullptr;
  int64_t state_stride = 0;
  SeqBoatShape shape;
  const float* in_coef = nullptr;   // [d, ne]
  const float* decay = nullptr;     // [d, ne]
  const float* out_coef = nullptr;  // [d, ne]
  const float* skip = nullptr;      // [d]
  float* h = nullptr;               // [n, d]
};

// Working-memory attention for the active tokens, in stream order per
// segment: each attends to its FIFO plus itself, then is pushed; every
// segment's position advances by its length, active or not.
//
// Two forms. With `ranges` (host), the active rows are given by the host:
// zrv and out hold the m active rows. With `ranges` null, a decode call
// (every segment at most one row) reads each row's activity from `compact`
// on the device: zrv holds all n step rows, and an active row r writes out
// row compact[r]; an inactive or empty segment only advances its position.
// Nothing in the latter depends on a value read back to the host.
struct SeqBoatAttendParams {
  const Segment* segs = nullptr;
  const SeqBoatActiveRange* ranges = nullptr;  // [nsegs], host memory
  int nsegs = 0;
  const int32_t* active_rows = nullptr;  // [m]: step rows of the active
  const int32_t* compact = nullptr;  // [n], the decode form only (see above)
  const float* zrv = nullptr;        // [m or n, z + 2v] W_zrv h + b before SiLU
  int ldzrv = 0;
  void* state = nullptr;
  int64_t state_stride = 0;
  SeqBoatShape shape;
  const float* qk_gamma = nullptr;  // [2, z]
  const float* qk_beta = nullptr;   // [2, z]
  const float* rel_bias = nullptr;  // [2M - 1], simple bias only, else null
  float* out = nullptr;             // [m, v] = O ⊙ R
};

// The latent configurator over n rows of router logits u (stride ldu):
// conf [n] (0 for inactive rows), compact [n] (a row's index among the
// active rows, -1 if inactive), active [1 + n] = count, then the active rows
// in order. A prefill caller copies `active` to the host once to size the
// GAU's GEMMs; a decode caller reads nothing back. `activated`, when set,
// is a running count (backend memory) the op adds this call's count to.
struct SeqBoatRouteParams {
  const float* u = nullptr;
  int ldu = 0;
  int n = 0;
  const float* temperature = nullptr;  // [1]
  float* conf = nullptr;
  int32_t* compact = nullptr;
  int32_t* active = nullptr;
  int64_t* activated = nullptr;
};

// out [n, d] = SiLU(s + g + conf · y[compact]) (y term 0 when compact < 0);
// g has stride ldg, y is [m, d]. out may alias s.
struct SeqBoatMixParams {
  const float* s = nullptr;
  const float* g = nullptr;
  int ldg = 0;
  const float* y = nullptr;
  const float* conf = nullptr;
  const int32_t* compact = nullptr;
  int n = 0;
  int d = 0;
  float* out = nullptr;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_SEQBOAT_PARAMS_H_
