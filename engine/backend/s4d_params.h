// The arguments of the S4D diagonal recurrence (MODELS.md §4.3), defined once
// for Backend::S4dScan, the CPU loop and the CUDA kernel, which receives the
// struct by value. Plain data, no absl: nvcc includes this header.
//
// Pointers are the backend's memory (device memory on CUDA). Segments of one
// call have distinct slots, except zero-length ones (decode padding), which
// may share a real segment's slot and touch no state.
#ifndef SEQBOAT_ENGINE_BACKEND_S4D_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_S4D_PARAMS_H_

#include <stdint.h>

#include "engine/backend/ffn_math.h"
#include "engine/backend/segment.h"

namespace seqboat {

struct S4dScanParams {
  const Segment* segs = nullptr;
  int nsegs = 0;
  const float* u = nullptr;  // inputs [n, h], row stride ldu
  int ldu = 0;
  const float* da = nullptr;  // [h, m, 2]
  const float* c = nullptr;   // [ch, h, m, 2]
  const float* d = nullptr;   // [ch, h]
  float* state = nullptr;     // slot s's zeta [h, m, 2] at state + s*stride
  int64_t state_stride = 0;
  int h = 0;
  int m = 0;
  int ch = 0;
  float scale = 1.0f;    // 2 for conjugate-half modes, 1 for the full set
  float* out = nullptr;  // [n, ch * h], column c * h + k (S4's "(c h)")
  // The layer's next elementwise step, folded: out = act(y), or
  // out += act(y) with accumulate (S4dStore).
  Activation act = Activation::kIdentity;
  bool accumulate = false;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_S4D_PARAMS_H_
