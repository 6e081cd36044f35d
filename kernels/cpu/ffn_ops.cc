// Feed-forward and mixture-of-experts ops on the CPU: rows in parallel, the
// per-element math from ffn_math.h.
#include <cstdint>

#include "engine/backend/ffn_math.h"
#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {

void CpuBackend::ActivateMul(const float* a, int lda, const float* b, int ldb,
                             int n, int f, Activation act, float* out, int ldo,
                             bool accumulate) {
#pragma omp parallel for schedule(static) if (WorthThreads(int64_t{n} * f))
  for (int i = 0; i < n; ++i) {
    const float* ai = a + static_cast<int64_t>(i) * lda;
    const float* bi =
        b != nullptr ? b + static_cast<int64_t>(i) * ldb : nullptr;
    float* oi = out + static_cast<int64_t>(i) * ldo;
    for (int j = 0; j < f; ++j) {
      float v = op_math::Activate(act, ai[j]);
      if (bi != nullptr) v *= bi[j];
      oi[j] = accumulate ? oi[j] + v : v;
    }
  }
}

void CpuBackend::AddBias(float* y, int ldy, int n, int d, const float* v) {
  for (int i = 0; i < n; ++i) {
    float* yi = y + static_cast<int64_t>(i) * ldy;
    for (int j = 0; j < d; ++j) yi[j] += v[j];
  }
}

void CpuBackend::MoeRoute(const float* logits, int n, int x, MoeRouting routing,
                          int top_k, bool renormalize, int32_t* experts,
                          float* gates) {
  const int slots = routing == MoeRouting::kReluDynamic ? x : top_k;
  for (int i = 0; i < n; ++i) {
    op_math::RouteRow(logits + static_cast<int64_t>(i) * x, x, routing, top_k,
                      renormalize, experts + static_cast<int64_t>(i) * slots,
                      gates + static_cast<int64_t>(i) * slots);
  }
}

void CpuBackend::ScatterAddScaled(const float* src, int d, const int32_t* rows,
                                  const float* scales, int m, float* dst,
                                  int lddst) {
  // Sequential over j: a row listed twice accumulates in list order.
  for (int j = 0; j < m; ++j) {
    const float* sj = src + static_cast<int64_t>(j) * d;
    float* dj = dst + static_cast<int64_t>(rows[j]) * lddst;
    const float s = scales[j];
    for (int k = 0; k < d; ++k) dj[k] += s * sj[k];
  }
}

}  // namespace seqboat::cpu
