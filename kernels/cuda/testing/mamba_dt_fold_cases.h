// Mamba-1's dt_proj folded into the scan (MambaScanParams::dt_proj), as the
// GPU test (kernels/cuda/mamba_ops_gpu_test.cc) and the emulation test
// (kernels/cuda/emu/mamba_dt_fold_emu_test.cc) run it: a layer's scan inputs
// at a model's shape (xdbl with δ̃ in its first dt_rank columns, B and C
// after, as mamba1.cc lays it out), one call folded or as the two ops it
// stands for (GemmOfDtProj, then the plain scan), on any backend.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_MAMBA_DT_FOLD_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_MAMBA_DT_FOLD_CASES_H_

#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::dt_fold {

struct FoldShape {
  const char* name;
  int e;      // d_inner
  int r;      // dt_rank
  int n;      // d_state
  int slots;  // state slots (a call's segments use distinct ones)
  int Cols() const { return r + 2 * n; }  // xdbl's
};

// Batches up to 64 over 65 slots (the last never used).
inline constexpr FoldShape kMamba130m = {"mamba-130m", 1536, 48, 16, 65};
inline constexpr FoldShape kMamba1b4 = {"mamba-1.4b", 4096, 128, 16, 65};

// Host inputs of every row a call may use (`rows` of them) and the layer's
// parameters; dt_proj's weights as Mamba initialises them, U(±r^-1/2), so
// that dt is O(1).
struct FoldInputs {
  FoldShape shape;
  int rows = 0;
  std::vector<float> w, x, xz, xdbl, a, d, dt_bias, state;
};

inline FoldInputs MakeFoldInputs(const FoldShape& s, int rows, uint32_t seed) {
  FoldInputs in;
  in.shape = s;
  in.rows = rows;
  const size_t e = s.e, n = s.n;
  const float bound = 1.0f / std::sqrt(static_cast<float>(s.r));
  in.w = Random(e * s.r, seed, -bound, bound);
  in.x = Random(rows * e, seed + 1);
  in.xz = Random(rows * 2 * e, seed + 2);
  in.xdbl = Random(rows * static_cast<size_t>(s.Cols()), seed + 3);
  const std::vector<float> jitter = Random(e * n, seed + 4, 0.5f, 1.5f);
  in.a.resize(e * n);
  for (size_t i = 0; i < in.a.size(); ++i) {
    in.a[i] = -static_cast<float>(i % n + 1) * jitter[i];
  }
  in.d = Random(e, seed + 5, 0.5f, 1.5f);
  in.dt_bias = Random(e, seed + 6, 0.001f, 0.1f);
  for (float& b : in.dt_bias) b = std::log(std::expm1(b));
  in.state = Random(s.slots * e * n, seed + 7);
  return in;
}

// `batch` decode rows on slots 0 .. batch-1, then a zero-length padding
// segment on slot 0 (as the model pads a bucket): batch + 1 rows.
inline std::vector<Segment> DecodeSegments(int batch) {
  std::vector<Segment> segs;
  for (int i = 0; i < batch; ++i) segs.push_back(Segment{i, i, 1});
  segs.push_back(Segment{0, batch, 0});
  return segs;
}

// What one call left: the scan's output rows and the whole state arena.
struct FoldRun {
  std::vector<float> y, state;
};

// One call of `segs` over the inputs' first rows with dt_proj `w` (uploaded
// to `be`): folded (MambaScanParams::dt_proj), or the GEMM into the dt
// scratch followed by the plain scan.
inline FoldRun RunFold(Backend& be, const Matrix& w, const FoldInputs& in,
                       const std::vector<Segment>& segs, bool folded) {
  const FoldShape& s = in.shape;
  const int rows = RowsOf(segs);
  const size_t e = s.e;
  auto head = [&](const std::vector<float>& v, size_t cols) {
    return std::vector<float>(v.begin(), v.begin() + rows * cols);
  };
  Array x(be, head(in.x, e)), xz(be, head(in.xz, 2 * e)),
      xdbl(be, head(in.xdbl, s.Cols())), a(be, in.a), d(be, in.d),
      dt_bias(be, in.dt_bias), state(be, in.state), dt(be, rows * e),
      y(be, std::vector<float>(rows * e, 7.0f));
  MambaScanParams p;
  p.segs = segs.data();
  p.nsegs = static_cast<int>(segs.size());
  p.x = x.get();
  p.bc = xdbl.get() + s.r;
  p.ldbc = s.Cols();
  p.z = xz.get() + e;
  p.ldz = 2 * s.e;
  p.a = a.get();
  p.d = d.get();
  p.dt_bias = dt_bias.get();
  p.state = state.get();
  p.state_stride = static_cast<int64_t>(s.e) * s.n;
  p.e = s.e;
  p.n_state = s.n;
  p.out = y.get();
  p.dt_proj.low = xdbl.get();
  p.dt_proj.ldlow = s.Cols();
  p.dt_proj.n = rows;
  p.dt_proj.w = w;
  p.dt_proj.dt = dt.get();
  if (folded) {
    be.MambaScan(p);
  } else {
    be.Gemm(GemmOfDtProj(p));
    be.MambaScan(ScanAfterDtProj(p));
  }
  ExpectNoError(be);
  return FoldRun{y.Read(), state.Read()};
}

}  // namespace seqboat::parity::dt_fold

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_MAMBA_DT_FOLD_CASES_H_
