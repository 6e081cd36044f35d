// Mamba-1's conv and scan kernels (kernels/mamba_kernels.cu), run on the CUDA
// emulation, equal the CPU backend's ops: the outputs and the whole state
// arena after each call, over calls that mix decode rows, prefill chunks and
// zero-length padding on a slot a real segment also uses, for every register
// specialisation and the global-memory fallbacks (k = 6; n = 3, 64).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/emu/emu_test_util.h"
#include "kernels/mamba_kernels.h"
#include "kernels/mamba_params.h"

namespace seqboat::emu_test {
namespace {

// Both sides evaluate op_math::ConvStep / ScanStep per (token, channel) in
// the same order, but the CPU backend builds with -ffast-math and vectorises
// exp through libmvec, while the emulated kernels use plain scalar libm: each
// op can differ by an ulp (seen: 2.4e-7 on outputs of magnitude ~1). An
// indexing or state error shows up as an O(1) difference.
constexpr float kTol = 1e-6f;
// Columns of x_proj's output before B, so B and C start unaligned.
constexpr int kDtRank = 3;
constexpr float kUnwritten = 7.0f;

class MambaEmulation : public EmulatedBackend {
 public:
  void MambaConv(const Segment* segs, int nsegs, const float* x, int ldx,
                 float* state, int64_t state_stride, const float* w,
                 const float* bias, int e, int k, float* out) override {
    // Host memory is device memory here: the segments need no staging.
    cuda::LaunchMambaConv(
        cuda::MambaConvParamsFor(segs, nsegs, x, ldx, state, state_stride, w,
                                 bias, e, k, out),
        nullptr);
  }
  void MambaScan(const Segment* segs, int nsegs, const float* x,
                 const float* dt, const float* bc, int ldbc, const float* z,
                 int ldz, const float* a, const float* d, const float* dt_bias,
                 float* state, int64_t state_stride, int e, int n_state,
                 float* out) override {
    cuda::LaunchMambaScan(
        cuda::MambaScanParamsFor(segs, nsegs, x, dt, bc, ldbc, z, ldz, a, d,
                                 dt_bias, state, state_stride, e, n_state, out),
        nullptr);
  }
};

struct Dims {
  int e;
  int n;    // n_state
  int k;    // conv taps
  int pad;  // floats after each slot's [conv | ssm] region
};

// A slot is [conv windows e*(k-1) | ssm e*n | pad], as engine/layers/mamba1.cc
// lays it out.
struct Layer {
  Dims dims;
  std::vector<float> conv_w, conv_b, a, d, dt_bias, arena;
  int64_t ConvFloats() const {
    return static_cast<int64_t>(dims.e) * (dims.k - 1);
  }
  int64_t Stride() const {
    return ConvFloats() + static_cast<int64_t>(dims.e) * dims.n + dims.pad;
  }
};

Layer MakeLayer(const Dims& dims, int slots, uint32_t seed) {
  Layer l;
  l.dims = dims;
  const int e = dims.e, n = dims.n;
  l.conv_w = Random(static_cast<size_t>(e) * dims.k, seed, -0.5f, 0.5f);
  l.conv_b = Random(e, seed + 1, -0.5f, 0.5f);
  const std::vector<float> jitter =
      Random(static_cast<size_t>(e) * n, seed + 2, 0.5f, 1.5f);
  l.a.resize(jitter.size());
  for (int c = 0; c < e; ++c) {
    for (int i = 0; i < n; ++i) {
      l.a[c * n + i] = -static_cast<float>(i + 1) * jitter[c * n + i];
    }
  }
  l.d = Random(e, seed + 3, 0.5f, 1.5f);
  l.dt_bias = Random(e, seed + 4, 0.001f, 0.1f);
  for (float& b : l.dt_bias) b = std::log(std::expm1(b));
  l.arena = Random(static_cast<size_t>(slots * l.Stride()), seed + 5);
  return l;
}

// Per call: conv output, scan output, arena afterwards.
struct Trace {
  std::vector<std::vector<float>> x, y, arena;
};

Trace RunCalls(Backend& be, const Layer& layer,
               const std::vector<std::vector<Segment>>& calls, uint32_t seed) {
  const int e = layer.dims.e, n = layer.dims.n;
  Array conv_w(be, layer.conv_w), conv_b(be, layer.conv_b), a(be, layer.a),
      d(be, layer.d), dt_bias(be, layer.dt_bias), arena(be, layer.arena);
  Trace t;
  for (const std::vector<Segment>& segs : calls) {
    const size_t rows = RowsOf(segs);
    seed += 10;
    Array xz(be, Random(rows * 2 * e, seed));
    Array dt(be, Random(rows * e, seed + 1));
    Array xdbl(be, Random(rows * (kDtRank + 2 * n), seed + 2));
    Array x(be, std::vector<float>(rows * e, kUnwritten));
    Array y(be, std::vector<float>(rows * e, kUnwritten));
    const int nsegs = static_cast<int>(segs.size());
    be.MambaConv(segs.data(), nsegs, xz.get(), 2 * e, arena.get(),
                 layer.Stride(), conv_w.get(), conv_b.get(), e, layer.dims.k,
                 x.get());
    be.MambaScan(segs.data(), nsegs, x.get(), dt.get(), xdbl.get() + kDtRank,
                 kDtRank + 2 * n, xz.get() + e, 2 * e, a.get(), d.get(),
                 dt_bias.get(), arena.get() + layer.ConvFloats(),
                 layer.Stride(), e, n, y.get());
    const absl::Status status = be.TakeError();
    EXPECT_TRUE(status.ok()) << status;
    t.x.push_back(x.Read());
    t.y.push_back(y.Read());
    t.arena.push_back(arena.Read());
  }
  return t;
}

TEST(MambaKernelsEmuTest, MatchesCpuOverMixedSegments) {
  // Every register specialisation (k 2..4, n 4..32), odd sizes (scalar state
  // rows, unaligned slots, partial blocks) and the fallbacks (k = 6; n = 3,
  // n = 64).
  for (const Dims& dims :
       {Dims{160, 16, 4, 0}, Dims{37, 5, 4, 0}, Dims{37, 5, 3, 1},
        Dims{40, 32, 2, 0}, Dims{72, 8, 4, 3}, Dims{64, 4, 4, 0},
        Dims{33, 3, 6, 0}, Dims{96, 64, 4, 0}, Dims{65, 16, 4, 2}}) {
    SCOPED_TRACE(testing::Message() << "e=" << dims.e << " n=" << dims.n
                                    << " k=" << dims.k << " pad=" << dims.pad);
    const Layer layer = MakeLayer(dims, 5, 100 + dims.e + dims.n);
    const auto calls = MixedCalls(dims.e * 7 + dims.n, 6, 9);
    auto cpu = MakeCpuBackend(1);
    MambaEmulation emu;
    const Trace want = RunCalls(*cpu, layer, calls, 200);
    const int64_t launches = emu::State().launches;
    const Trace got = RunCalls(emu, layer, calls, 200);
    // Conv and scan are kernels on every call.
    EXPECT_EQ(emu::State().launches - launches,
              2 * static_cast<int64_t>(calls.size()));
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_LE(MaxAbsDiff(want.x[i], got.x[i]), kTol) << "conv, call " << i;
      EXPECT_LE(MaxAbsDiff(want.y[i], got.y[i]), kTol) << "scan, call " << i;
      EXPECT_LE(MaxAbsDiff(want.arena[i], got.arena[i]), kTol)
          << "state, call " << i;
    }
    // The calls did move the state (the comparison is not vacuous), and the
    // slot no segment uses kept it.
    EXPECT_GT(MaxAbsDiff(layer.arena, want.arena.back()), 0.0f);
    const size_t last = static_cast<size_t>(4 * layer.Stride());
    EXPECT_TRUE(std::equal(layer.arena.begin() + last, layer.arena.end(),
                           got.arena.back().begin() + last));
  }
}

}  // namespace
}  // namespace seqboat::emu_test
