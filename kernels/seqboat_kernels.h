// Launchers of the SeqBoat kernels (seqboat_kernels.cu): MD-EMA, latent
// configurator, working-memory attention and the output mix (MODELS.md §2;
// contracts in engine/backend/backend.h). Pointers are device memory; each
// launcher enqueues on `stream` and returns at once. Empty work launches
// nothing, except the router, which always writes the active count.
#ifndef SEQBOAT_KERNELS_SEQBOAT_KERNELS_H_
#define SEQBOAT_KERNELS_SEQBOAT_KERNELS_H_

#include <cuda_runtime_api.h>
#include <stdint.h>

#include "engine/backend/seqboat_shape.h"

namespace seqboat::cuda {

// Byte-for-byte the engine's Segment (backend.h, which nvcc cannot include);
// seqboat_ops.cc asserts the layouts match.
struct SeqBoatSeg {
  int32_t slot;
  int32_t start;
  int32_t len;
};

// Slot s's state region (seqboat_math.h SeqBoatSlot) is at
// state + s * state_stride bytes.
struct SeqBoatEmaParams {
  const SeqBoatSeg* segs = nullptr;  // [nsegs]
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
// One thread per (segment, channel), walking the segment's tokens in order.
void LaunchSeqBoatEma(const SeqBoatEmaParams& p, cudaStream_t stream);

// conf [n], compact [n], active [1 + n] (count, then the active rows in
// order; entries past the count are left untouched). One block.
void LaunchSeqBoatRoute(const float* u, int ldu, int n,
                        const float* temperature, float* conf, int32_t* compact,
                        int32_t* active, cudaStream_t stream);

struct SeqBoatAttendParams {
  const SeqBoatSeg* segs = nullptr;            // [nsegs]
  const SeqBoatActiveRange* ranges = nullptr;  // [nsegs]
  int nsegs = 0;
  const int32_t* active_rows = nullptr;  // [m]
  const float* zrv = nullptr;            // [m, z + 2v], stride ldzrv
  int ldzrv = 0;
  void* state = nullptr;
  int64_t state_stride = 0;
  SeqBoatShape shape;
  const float* qk_gamma = nullptr;  // [2, z]
  const float* qk_beta = nullptr;   // [2, z]
  const float* rel_bias = nullptr;  // [2M - 1], simple bias only
  // RopeInvFreq(i) for i < z/2, rope only: computed on the host so both
  // backends rotate by the same angles.
  const double* inv_freq = nullptr;
  float scale = 1.0f;    // SeqBoatScoreScale(shape)
  float* out = nullptr;  // [m, v]
};
// One block per segment, its active tokens in order. Shared memory grows
// with w (about 8 bytes per FIFO entry); w up to ~28k fits an H100.
void LaunchSeqBoatAttend(const SeqBoatAttendParams& p, cudaStream_t stream);
// Dynamic shared memory one LaunchSeqBoatAttend block needs for `shape`.
size_t SeqBoatAttendSharedBytes(const SeqBoatShape& shape);

// out [n, d] = SeqBoatOut(s, g, conf, y[compact] or 0); out may alias s.
void LaunchSeqBoatMix(const float* s, const float* g, int ldg, const float* y,
                      const float* conf, const int32_t* compact, int n, int d,
                      float* out, cudaStream_t stream);

}  // namespace seqboat::cuda

#endif  // SEQBOAT_KERNELS_SEQBOAT_KERNELS_H_
