// The SeqBoat block's ops on the CPU (MODELS.md §2): one (segment, channel)
// pair per loop iteration for the EMA, one segment per iteration for the
// working-memory attention (its tokens are sequential: each one sees the
// FIFO as the previous active token left it). Math from seqboat_math.h.
#include <cstring>
#include <vector>

#include "engine/backend/seqboat_math.h"
#include "kernels/cpu/cpu_backend_impl.h"
#include "kernels/cpu/parallel.h"

namespace seqboat::cpu {
namespace {

void* SlotBase(void* state, int64_t stride, int slot) {
  return static_cast<char*>(state) + static_cast<int64_t>(slot) * stride;
}

}  // namespace

void CpuBackend::SeqBoatEma(const SeqBoatEmaParams& p) {
  const int d = p.shape.d, ne = p.shape.ne;
#pragma omp parallel for collapse(2) schedule( \
    static) if (WorthThreads(SegmentRows(p.segs, p.nsegs) * d * ne * 2))
  for (int s = 0; s < p.nsegs; ++s) {
    for (int c = 0; c < d; ++c) {
      const Segment& seg = p.segs[s];
      op_math::SeqBoatSlot slot = op_math::SeqBoatSlotAt(
          SlotBase(p.state, p.state_stride, seg.slot), p.shape);
      const int64_t off = static_cast<int64_t>(c) * ne;
      for (int t = seg.start; t < seg.start + seg.len; ++t) {
        const int64_t i = static_cast<int64_t>(t) * d + c;
        p.h[i] = op_math::SeqBoatEmaStep(slot.ema + off, p.in_coef + off,
                                         p.decay + off, p.out_coef + off,
                                         p.skip[c], p.x[i], ne);
      }
    }
  }
}

void CpuBackend::SeqBoatRoute(const SeqBoatRouteParams& p) {
  const float* u = p.u;
  const int ldu = p.ldu, n = p.n;
  const float* temperature = p.temperature;
  float* conf = p.conf;
  int32_t *compact = p.compact, *active = p.active;
  // A running count: the compaction is an exclusive scan over the decisions.
  int32_t m = 0;
  for (int i = 0; i < n; ++i) {
    const float* ui = u + static_cast<int64_t>(i) * ldu;
    if (op_math::SeqBoatRoute(ui[0], ui[1], temperature[0], &conf[i])) {
      compact[i] = m;
      active[1 + m] = i;
      ++m;
    } else {
      compact[i] = -1;
    }
  }
  active[0] = m;
  if (p.activated != nullptr) *p.activated += m;
}

void CpuBackend::SeqBoatAttend(const SeqBoatAttendParams& p) {
  const Segment* segs = p.segs;
  const int nsegs = p.nsegs;
  const SeqBoatActiveRange* ranges = p.ranges;
  const int32_t* active_rows = p.active_rows;
  const float *zrv = p.zrv, *qk_gamma = p.qk_gamma, *qk_beta = p.qk_beta,
              *rel_bias = p.rel_bias;
  const int ldzrv = p.ldzrv;
  void* state = p.state;
  const int64_t state_stride = p.state_stride;
  const SeqBoatShape& shape = p.shape;
  float* out = p.out;
  const int z = shape.z, v = shape.v, w = shape.w;
  const bool rope = shape.pos == SeqBoatPos::kRopeInterleaved;
  const float scale = op_math::SeqBoatScoreScale(shape);
  const std::vector<double> inv_freq = op_math::SeqBoatRopeInvFreq(shape);
#pragma omp parallel for schedule(                                    \
    dynamic) if (nsegs > 1 && WorthThreads(SegmentRows(segs, nsegs) * \
                                           int64_t{w} * (z + v)))
  for (int s = 0; s < nsegs; ++s) {
    const Segment& seg = segs[s];
    // A zero-length (padding) segment may share its slot with a real one in
    // this call: it must not write the stream position back.
    if (seg.len == 0) continue;
    op_math::SeqBoatSlot slot =
        op_math::SeqBoatSlotAt(SlotBase(state, state_stride, seg.slot), shape);
    std::vector<float> q(z), k(z), scores(w + 1), vself(v), o(v);
    const int64_t base = slot.meta[op_math::kNextPos];
    // The decode form: the segment's one row, active by `compact`.
    const bool decode = ranges == nullptr;
    const int first = decode ? 0 : ranges[s].first;
    const int count =
        decode ? (p.compact[seg.start] >= 0 ? 1 : 0) : ranges[s].count;
    for (int a = first; a < first + count; ++a) {
      const int row = decode ? seg.start : active_rows[a];
      const int64_t t = base + (row - seg.start);
      const int64_t in_row = decode ? seg.start : a;
      const int64_t out_row = decode ? p.compact[seg.start] : a;
      const float* raw = zrv + in_row * ldzrv;
      for (int i = 0; i < z; ++i) {
        const float zi = op_math::Silu(raw[i]);
        q[i] = op_math::SeqBoatAffine(zi, qk_gamma[i], qk_beta[i]);
        k[i] = op_math::SeqBoatAffine(zi, qk_gamma[z + i], qk_beta[z + i]);
      }
      // Keys: the FIFO oldest first, then the token itself.
      const int len = static_cast<int>(slot.meta[op_math::kFifoLen]);
      const int64_t head = slot.meta[op_math::kFifoHead];
      for (int j = 0; j <= len; ++j) {
        const bool self = j == len;
        const int idx = self ? 0 : op_math::FifoIndex(head, j, w);
        const float* kj = self ? k.data() : slot.keys + int64_t{idx} * z;
        const int64_t delta = self ? 0 : slot.pos[idx] - t;
        const float dot =
            rope ? op_math::RopeRelDot(q.data(), kj, z, delta, inv_freq.data())
                 : op_math::Dot(q.data(), kj, z);
        const float bias =
            rope ? 0.0f
                 : op_math::SimpleBias(rel_bias, shape.rel_pos_max, delta);
        scores[j] = op_math::SeqBoatScore(shape, dot, scale, bias);
      }
      op_math::SeqBoatNormalise(shape, scores.data(), len + 1);
      // O ⊙ R, with V and R the SiLU of their projection rows; value rows
      // are read whole, one key at a time.
      for (int i = 0; i < v; ++i) {
        vself[i] = op_math::Silu(raw[z + v + i]);
        o[i] = scores[len] * vself[i];
      }
      for (int j = 0; j < len; ++j) {
        const float* vj =
            slot.vals + int64_t{op_math::FifoIndex(head, j, w)} * v;
        for (int i = 0; i < v; ++i) o[i] += scores[j] * vj[i];
      }
      float* dst = out + out_row * v;
      for (int i = 0; i < v; ++i) dst[i] = o[i] * op_math::Silu(raw[z + i]);
      const int e = op_math::FifoPush(slot.meta, w);
      std::memcpy(slot.keys + int64_t{e} * z, k.data(), sizeof(float) * z);
      std::memcpy(slot.vals + int64_t{e} * v, vself.data(), sizeof(float) * v);
      slot.pos[e] = t;
    }
    slot.meta[op_math::kNextPos] = base + seg.len;
  }
}

void CpuBackend::SeqBoatMix(const SeqBoatMixParams& p) {
  // p's fields as locals, so the loops compile as they did when these were
  // the op's arguments.
  const float *s = p.s, *g = p.g, *y = p.y, *conf = p.conf;
  const int32_t* compact = p.compact;
  const int ldg = p.ldg, n = p.n, d = p.d;
  float* out = p.out;
#pragma omp parallel for schedule(static) if (WorthThreads(int64_t{n} * d))
  for (int i = 0; i < n; ++i) {
    const int64_t r = static_cast<int64_t>(i) * d;
    const float* gi = g + static_cast<int64_t>(i) * ldg;
    const float* yi =
        compact[i] >= 0 ? y + static_cast<int64_t>(compact[i]) * d : nullptr;
    for (int j = 0; j < d; ++j) {
      out[r + j] = op_math::SeqBoatOut(s[r + j], gi[j], conf[i],
                                       yi != nullptr ? yi[j] : 0.0f);
    }
  }
}

}  // namespace seqboat::cpu
