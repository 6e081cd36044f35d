// Feed-forward and mixture-of-experts ops on the CPU: rows in parallel, the
// per-element math from ffn_math.h.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/backend/ffn_math.h"
#include "engine/backend/moe_params.h"
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

// Pairs sorted by (expert, row, slot): a counting sort, as the CUDA kernel
// orders them.
void CpuBackend::MoeGroup(const MoeGroupParams& p) {
  const int pairs = p.n * p.slots, x = p.x;
  std::vector<int> next(static_cast<size_t>(x) + 1, 0);
  for (int i = 0; i < pairs; ++i) {
    const int e = p.experts[i];
    if (e >= 0 && e < x) ++next[e + 1];
  }
  for (int e = 0; e < x; ++e) next[e + 1] += next[e];
  const std::vector<int> first = next;
  std::fill(p.pair_row, p.pair_row + pairs, -1);
  std::fill(p.pair_gate, p.pair_gate + pairs, 0.0f);
  for (int i = 0; i < pairs; ++i) {
    const int e = p.experts[i];
    const int at = e >= 0 && e < x ? next[e]++ : -1;
    p.pair_of[i] = at;
    if (at < 0) continue;
    p.pair_row[at] = i / p.slots;
    p.pair_gate[at] = p.gates[i];
  }
  const int bound = MoeTileBound(p.n, p.slots, x);
  std::fill(p.tiles, p.tiles + 3 * bound, 0);
  int t = 0;
  for (int e = 0; e < x; ++e) {
    for (int at = first[e]; at < first[e + 1]; at += kMoeTileRows) {
      p.tiles[3 * t] = e;
      p.tiles[3 * t + 1] = at;
      p.tiles[3 * t + 2] = std::min(kMoeTileRows, first[e + 1] - at);
      ++t;
    }
  }
}

// Each tile's rows gathered and multiplied by the packed GEMM, whose rows do
// not depend on their batch: the host-grouped path's bits.
void CpuBackend::MoeGemm(const MoeGemmParams& p) {
  const int cols = static_cast<int>(p.shape.cols),
            rows = static_cast<int>(p.shape.rows);
  std::vector<float> xs(static_cast<size_t>(kMoeTileRows) * cols);
  for (int t = 0; t < p.ntiles; ++t) {
    const int e = p.tiles[3 * t], at = p.tiles[3 * t + 1],
              m = p.tiles[3 * t + 2];
    if (m <= 0) continue;
    for (int j = 0; j < m; ++j) {
      const int r = p.x_rows != nullptr ? p.x_rows[at + j] : at + j;
      const float* src = p.x + static_cast<int64_t>(r) * p.ldx;
      std::copy(src, src + cols, xs.data() + static_cast<int64_t>(j) * cols);
    }
    GemmParams g;
    g.x = xs.data();
    g.ldx = cols;
    g.n = m;
    g.w = p.experts[e];
    g.bias =
        p.bias != nullptr ? p.bias + static_cast<int64_t>(e) * rows : nullptr;
    g.y = p.y + static_cast<int64_t>(at) * p.ldy;
    g.ldy = p.ldy;
    Gemm(g);
  }
}

void CpuBackend::MoeCombine(const MoeCombineParams& p) {
  std::vector<int32_t> mine;
  for (int i = 0; i < p.n; ++i) {
    float* di = p.dst + static_cast<int64_t>(i) * p.lddst;
    if (p.pair_of == nullptr) {
      const float s = SharedExpertGate(p.scale, p.gate_logits[i]);
      const float* si = p.src + static_cast<int64_t>(i) * p.ldsrc;
      for (int k = 0; k < p.d; ++k) di[k] = ScaledResidualAdd(di[k], s, si[k]);
      continue;
    }
    const int32_t* of = p.pair_of + static_cast<int64_t>(i) * p.slots;
    mine.clear();
    for (int j = 0; j < p.slots; ++j) {
      if (of[j] >= 0) mine.push_back(of[j]);
    }
    std::sort(mine.begin(), mine.end());
    for (const int32_t q : mine) {
      const float s = p.pair_gate[q];
      const float* sq = p.src + static_cast<int64_t>(q) * p.ldsrc;
      for (int k = 0; k < p.d; ++k) di[k] = ScaledResidualAdd(di[k], s, sq[k]);
    }
  }
}

}  // namespace seqboat::cpu
