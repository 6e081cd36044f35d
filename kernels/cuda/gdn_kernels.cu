// Gated DeltaNet kernel. A value head's state S [k_dim, v_dim] changes by a
// decay and a rank-1 update per token, and column j of it only ever meets
// column j: thread j owns the column for the whole segment and walks it twice
// a token (decay and recall, then update and read-out), reading rows of S
// across the block's threads at once. The per-token sums over a head (the
// norms of q and k, the RMS of the read-out) are taken by one thread in index
// order, as the CPU takes them.
#include <stdint.h>

#include "engine/backend/gdn_math.h"
#include "engine/backend/op_math.h"
#include "kernels/cuda/gdn_kernels.h"
#include "kernels/cuda/launch.cuh"

namespace seqboat::cuda {
namespace {

constexpr int kMaxGridY = 65535;

// Shared: q̂ and k̂ [k_dim] each, the read-out [v_dim], then the token's
// scalars.
enum Scalar { kInvQ = 0, kInvK, kBeta, kDecay, kRms, kScalars };

__global__ void GdnScanKernel(GdnScanParams p) {
  JoinLaunchChain();
  SEQBOAT_DYNAMIC_SHARED(float, smem);
  const int dk = p.k_dim, dv = p.v_dim, h = blockIdx.x, j = threadIdx.x;
  float* q = smem;
  float* k = q + dk;
  float* o = k + dk;
  float* scalar = o + dv;
  const int64_t kd = static_cast<int64_t>(p.k_heads) * dk;
  const int64_t kh = op_math::GdnKeyHead(h, p.v_heads, p.k_heads);
  const float q_scale = 1.0f / sqrtf(static_cast<float>(dk));
  for (int s = blockIdx.y; s < p.nsegs; s += gridDim.y) {
    const Segment seg = p.segs[s];
    float* state =
        p.state + seg.slot * p.state_stride + static_cast<int64_t>(h) * dk * dv;
    for (int t = seg.start; t < seg.start + seg.len; ++t) {
      const float* row = p.qkv + static_cast<int64_t>(t) * p.ldqkv;
      for (int i = threadIdx.x; i < dk; i += blockDim.x) {
        q[i] = row[kh * dk + i];
        k[i] = row[kd + kh * dk + i];
      }
      __syncthreads();
      const int64_t zrow = static_cast<int64_t>(t) * p.ldz;
      if (threadIdx.x == 0) {
        float sq = 0.0f, sk = 0.0f;
        for (int i = 0; i < dk; ++i) {
          sq += q[i] * q[i];
          sk += k[i] * k[i];
        }
        scalar[kInvQ] = op_math::GdnInvNorm(sq);
        scalar[kInvK] = op_math::GdnInvNorm(sk);
        scalar[kBeta] = op_math::Sigmoid(p.b[zrow + h]);
        scalar[kDecay] =
            op_math::GdnDecay(p.a[zrow + h], p.dt_bias[h], p.a_coef[h]);
      }
      __syncthreads();
      const float inv_q = scalar[kInvQ], inv_k = scalar[kInvK];
      for (int i = threadIdx.x; i < dk; i += blockDim.x) {
        q[i] = q[i] * inv_q * q_scale;
        k[i] = k[i] * inv_k;
      }
      __syncthreads();
      float oj = 0.0f;
      if (j < dv) {
        const float decay = scalar[kDecay];
        float m = 0.0f;
        for (int i = 0; i < dk; ++i) {
          const int64_t at = static_cast<int64_t>(i) * dv + j;
          const float sij = state[at] * decay;
          state[at] = sij;
          m += sij * k[i];
        }
        const float delta =
            scalar[kBeta] *
            (row[2 * kd + static_cast<int64_t>(h) * dv + j] - m);
        for (int i = 0; i < dk; ++i) {
          const int64_t at = static_cast<int64_t>(i) * dv + j;
          const float sij = state[at] + k[i] * delta;
          state[at] = sij;
          oj += sij * q[i];
        }
        o[j] = oj;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        float so = 0.0f;
        for (int c = 0; c < dv; ++c) so += o[c] * o[c];
        scalar[kRms] = op_math::RmsScale(so, dv, p.norm_eps);
      }
      __syncthreads();
      if (j < dv) {
        const float z = p.z[zrow + static_cast<int64_t>(h) * dv + j];
        p.out[static_cast<int64_t>(t) * p.ldo + static_cast<int64_t>(h) * dv +
              j] = p.norm_w[j] * (oj * scalar[kRms]) * op_math::Silu(z);
      }
      // The next token overwrites q, k, o and the scalars.
      __syncthreads();
    }
  }
}

}  // namespace

void LaunchGdnScan(const GdnScanParams& p, LaunchQueue queue) {
  if (p.nsegs <= 0 || p.v_heads <= 0 || p.k_heads <= 0 || p.k_dim <= 0 ||
      p.v_dim <= 0 || p.v_dim > kGdnMaxVDim) {
    return;
  }
  const dim3 grid(p.v_heads, p.nsegs < kMaxGridY ? p.nsegs : kMaxGridY);
  const int threads = (p.v_dim + 31) / 32 * 32;
  const size_t shared =
      (2 * static_cast<size_t>(p.k_dim) + p.v_dim + kScalars) * sizeof(float);
  SEQBOAT_LAUNCH_ON(grid, threads, shared, queue, GdnScanKernel)(p);
}

}  // namespace seqboat::cuda
