// Mamba-1's conv folded into its input projection (GemmParams::conv), run
// by the emulation test (kernels/cuda/emu) and the GPU test alike: the same
// backend runs decode steps of in_proj (with its folded RMS pre-norm, as
// engine/layers/mamba1.cc issues it) as the GEMM then the conv op, and as
// one Gemm with the conv folded, each on its own copy of the slots' state;
// outputs, conv outputs and the states after every step must agree bit for
// bit (the fused epilogue uses the conv kernel's arithmetic).
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_GEMV_CONV_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_GEMV_CONV_CASES_H_

#include <algorithm>
#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::conv_fold {

// in_proj [2e, d] of a Mamba-1 block of d_model d, d_inner e, conv of k
// taps over the first e outputs.
struct ConvShape {
  const char* name;
  int e;
  int d;
  int k = 4;
};

inline constexpr ConvShape kMamba130m{"mamba-130m in_proj", 1536, 768};
inline constexpr ConvShape kMamba1b4{"mamba-1.4b in_proj", 4096, 2048};

// Floats between slots: the conv window, then floats the conv must leave
// alone (Mamba-1 keeps its scan state there).
inline int64_t SlotStride(const ConvShape& s) {
  return int64_t{s.e} * (s.k - 1) + 16;
}

// Slots a batch of n uses: one per real row, plus one no step uses.
inline int SlotsFor(int n) { return n + 1; }

// Conv outputs start as this, so a row written where it should not be (or
// not written) shows.
inline constexpr float kUnwritten = 1234.5f;

// Step t of a decode batch of n rows: n - n/4 real rows (at 2, one real
// and one padding), the rest zero-length padding on the first real row's
// slot as the model pads buckets, one of them among the middle rows when
// there are two. Real rows take slots [0, real] in a rotation that leaves
// a different one out each step, and odd steps list the segments in
// reverse row order, so that a row's segment is found by its start, not
// its index.
inline std::vector<Segment> DecodeStep(int n, int t) {
  const int pads = n == 2 ? 1 : n / 4;
  const int real = n - pads;
  std::vector<int> pad_rows;
  if (pads >= 2) pad_rows.push_back(real / 2);
  for (int row = n - 1; static_cast<int>(pad_rows.size()) < pads; --row) {
    pad_rows.push_back(row);
  }
  std::vector<Segment> segs;
  int j = 0, first_slot = -1;
  for (int row = 0; row < n; ++row) {
    if (std::find(pad_rows.begin(), pad_rows.end(), row) != pad_rows.end()) {
      continue;
    }
    const int slot = (j + t) % (real + 1);
    if (first_slot < 0) first_slot = slot;
    segs.push_back({slot, row, 1});
    ++j;
  }
  for (const int row : pad_rows) segs.push_back({first_slot, row, 0});
  std::sort(segs.begin(), segs.end(), [](const Segment& a, const Segment& b) {
    return a.start < b.start;
  });
  if (t % 2 == 1) std::reverse(segs.begin(), segs.end());
  return segs;
}

// The block's parameters on the backend under test.
struct ConvWeights {
  const float* norm_w = nullptr;  // [d]
  const float* conv_w = nullptr;  // [e, k]
  const float* conv_b = nullptr;  // [e] or null
};

// Decode steps 0 .. steps-1 of a batch of n (DecodeStep).
inline std::vector<std::vector<Segment>> DecodeSteps(int n, int steps) {
  std::vector<std::vector<Segment>> calls;
  for (int t = 0; t < steps; ++t) calls.push_back(DecodeStep(n, t));
  return calls;
}

// Calls of in_proj both ways: y [calls, rows, 2e], conv outputs [calls,
// rows, e] (rows: the most any call spans; call t's at offset t x rows),
// the state after the last call.
struct ConvFoldRun {
  std::vector<float> y_unfused, x_unfused, state_unfused;
  std::vector<float> y_fused, x_fused, state_fused;
};

// The Gemm of one call (norm folded), conv not yet set.
inline GemmParams InProj(const ConvShape& s, const Matrix& w,
                         const ConvWeights& cw, float* resid, int n, float* u,
                         float* y) {
  GemmParams g;
  g.x = resid;
  g.ldx = s.d;
  g.n = n;
  g.w = w;
  g.y = y;
  g.ldy = 2 * s.e;
  g.norm.kind = NormKind::kRms;
  g.norm.w = cw.norm_w;
  g.norm.eps = 1e-5f;
  g.norm.out = u;
  g.norm.ldo = s.d;
  return g;
}

inline GemmConv ConvOf(const ConvShape& s, const ConvWeights& cw,
                       const std::vector<Segment>& segs, float* state,
                       float* out) {
  GemmConv c;
  c.segs = segs.data();
  c.nsegs = static_cast<int>(segs.size());
  c.state = state;
  c.state_stride = SlotStride(s);
  c.w = cw.conv_w;
  c.bias = cw.conv_b;
  c.e = s.e;
  c.k = s.k;
  c.out = out;
  return c;
}

// resid: at least calls x rows of d floats (call t reads from row t x
// rows on); state0: as many slots of SlotStride floats as the calls use.
inline ConvFoldRun RunConvFold(Backend& be, const ConvShape& s, const Matrix& w,
                               const ConvWeights& cw,
                               const std::vector<float>& resid,
                               const std::vector<float>& state0,
                               const std::vector<std::vector<Segment>>& calls) {
  int rows = 0;
  for (const auto& segs : calls) rows = std::max(rows, RowsOf(segs));
  const int64_t steps = static_cast<int64_t>(calls.size());
  const int64_t per_y = int64_t{rows} * 2 * s.e, per_x = int64_t{rows} * s.e;
  const std::vector<float> unwritten(static_cast<size_t>(steps * per_x),
                                     kUnwritten);
  Array ra(be, resid), u(be, int64_t{rows} * s.d), st1(be, state0),
      st2(be, state0), y1(be, steps * per_y), y2(be, steps * per_y),
      x1(be, unwritten), x2(be, unwritten);
  for (int64_t t = 0; t < steps; ++t) {
    const std::vector<Segment>& segs = calls[t];
    const int n = RowsOf(segs);
    float* resid_t = ra.get() + t * rows * s.d;
    GemmParams g = InProj(s, w, cw, resid_t, n, u.get(), y1.get() + t * per_y);
    be.Gemm(g);
    g.conv = ConvOf(s, cw, segs, st1.get(), x1.get() + t * per_x);
    be.MambaConv(ConvOfGemm(g));
    g = InProj(s, w, cw, resid_t, n, u.get(), y2.get() + t * per_y);
    g.conv = ConvOf(s, cw, segs, st2.get(), x2.get() + t * per_x);
    be.Gemm(g);
  }
  ExpectNoError(be);
  return ConvFoldRun{y1.Read(), x1.Read(), st1.Read(),
                     y2.Read(), x2.Read(), st2.Read()};
}

// The block's inputs for a shape: residual rows ~ N(0, 1)-ish, conv taps
// and bias like a trained block's (|w| < 0.5), a random initial state.
struct ConvInputs {
  std::vector<float> w, resid, norm_w, conv_w, conv_b, state0;
};

inline ConvInputs MakeConvInputs(const ConvShape& s, int max_n, int steps) {
  ConvInputs in;
  in.w = Random(int64_t{2} * s.e * s.d, 61 + s.d);
  in.resid = Random(int64_t{steps} * max_n * s.d, 62 + s.d, -3, 3);
  in.norm_w = Random(s.d, 63, 0.5f, 1.5f);
  in.conv_w = Random(int64_t{s.e} * s.k, 64, -0.5f, 0.5f);
  in.conv_b = Random(s.e, 65, -0.5f, 0.5f);
  in.state0 = Random(SlotsFor(max_n) * SlotStride(s), 66, -2, 2);
  return in;
}

}  // namespace seqboat::parity::conv_fold

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_GEMV_CONV_CASES_H_
