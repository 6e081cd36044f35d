// Feed-forward and mixture-of-experts ops on the CPU: rows in parallel, the
// per-element math from ffn_math.h.
#include <cstdint>

#include "engine/backend/ffn_math.h"
#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {

void CpuBackend::ActivateMul(const ActivateMulParams& p) {
  // p's fields as locals, so the loop compiles as it did when these were the
  // op's arguments (fields read through p could change as out is written).
  const float *a = p.a, *b = p.b;
  const int lda = p.lda, ldb = p.ldb, n = p.n, f = p.f, ldo = p.ldo;
  const Activation act = p.act;
  const bool accumulate = p.accumulate;
  float* out = p.out;
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

void CpuBackend::AddBias(const AddBiasParams& p) {
  float* y = p.y;
  const int ldy = p.ldy, n = p.n, d = p.d;
  const float* v = p.v;
  for (int i = 0; i < n; ++i) {
    float* yi = y + static_cast<int64_t>(i) * ldy;
    for (int j = 0; j < d; ++j) yi[j] += v[j];
  }
}

void CpuBackend::MoeRoute(const MoeRouteParams& p) {
  const float* logits = p.logits;
  const int n = p.n, x = p.x, top_k = p.top_k;
  const MoeRouting routing = p.routing;
  const bool renormalize = p.renormalize;
  int32_t* experts = p.experts;
  float* gates = p.gates;
  const int slots = routing == MoeRouting::kReluDynamic ? x : top_k;
  for (int i = 0; i < n; ++i) {
    op_math::RouteRow(logits + static_cast<int64_t>(i) * x, x, routing, top_k,
                      renormalize, p.scale, p.group,
                      experts + static_cast<int64_t>(i) * slots,
                      gates + static_cast<int64_t>(i) * slots);
  }
}

void CpuBackend::ScatterAddScaled(const ScatterAddParams& p) {
  const float *src = p.src, *scales = p.scales;
  const int32_t* rows = p.rows;
  const int d = p.d, m = p.m, lddst = p.lddst;
  float* dst = p.dst;
  // Sequential over j: a row listed twice accumulates in list order.
  for (int j = 0; j < m; ++j) {
    const float* sj = src + static_cast<int64_t>(j) * d;
    float* dj = dst + static_cast<int64_t>(rows[j]) * lddst;
    const float s = scales[j];
    for (int k = 0; k < d; ++k) dj[k] = ScaledResidualAdd(dj[k], s, sj[k]);
  }
}

}  // namespace seqboat::cpu
