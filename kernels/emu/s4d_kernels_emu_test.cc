// S4D's recurrence kernel (kernels/s4d_kernels.cu), run on the CUDA
// emulation, equals the CPU backend's op: the output and the whole state
// arena after each call, over calls that mix decode rows, prefill chunks and
// zero-length padding on a slot a real segment also uses, for every register
// mode count (4..32, aligned and unaligned slots), several output copies and
// the global-memory fallback (m = 5, m = 64).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/emu/emu_test_util.h"
#include "kernels/s4d_kernels.h"
#include "kernels/s4d_params.h"

namespace seqboat::emu_test {
namespace {

// The same S4dUpdate / S4dReadout per (token, channel) in the same order on
// both sides; the CPU backend's -ffast-math build may contract or reorder
// the complex products differently (seen: up to ~1e-6 on states of ~4). A
// wrong index or mode is off by O(1).
constexpr float kTol = 1e-5f;
constexpr float kUnwritten = 7.0f;

class S4dEmulation : public EmulatedBackend {
 public:
  void S4dScan(const Segment* segs, int nsegs, const float* u, int ldu,
               const float* da, const float* c, const float* d, float* state,
               int64_t state_stride, int h, int m, int ch, float scale,
               float* out) override {
    // Host memory is device memory here: the segments need no staging.
    cuda::LaunchS4dScan(
        cuda::S4dScanParamsFor(segs, nsegs, u, ldu, da, c, d, state,
                               state_stride, h, m, ch, scale, out),
        nullptr);
  }
};

struct Dims {
  int h;
  int m;   // complex modes
  int ch;  // output copies
  float scale;
  int pad;  // floats after each slot's zeta
};

struct Layer {
  Dims dims;
  std::vector<float> da, c, d, arena;
  int64_t Stride() const {
    return static_cast<int64_t>(dims.h) * dims.m * 2 + dims.pad;
  }
  int Ldu() const { return dims.h + 5; }  // u is a column slice
};

Layer MakeLayer(const Dims& dims, int slots, uint32_t seed) {
  Layer l;
  l.dims = dims;
  const size_t modes = static_cast<size_t>(dims.h) * dims.m;
  // Stable modes (|dA| in [0.3, 0.95]) and small C keep zeta and the
  // outputs O(1).
  const std::vector<float> mag = Random(modes, seed, 0.3f, 0.95f);
  const std::vector<float> phase = Random(modes, seed + 1, -3.14159f, 3.14159f);
  l.da.resize(2 * modes);
  for (size_t i = 0; i < modes; ++i) {
    l.da[2 * i] = mag[i] * std::cos(phase[i]);
    l.da[2 * i + 1] = mag[i] * std::sin(phase[i]);
  }
  l.c = Random(2 * modes * dims.ch, seed + 2, -0.1f, 0.1f);
  l.d = Random(static_cast<size_t>(dims.ch) * dims.h, seed + 3);
  l.arena = Random(static_cast<size_t>(slots * l.Stride()), seed + 4);
  return l;
}

struct Trace {
  std::vector<std::vector<float>> y, arena;
};

Trace RunCalls(Backend& be, const Layer& layer,
               const std::vector<std::vector<Segment>>& calls, uint32_t seed) {
  const Dims& dims = layer.dims;
  Array da(be, layer.da), c(be, layer.c), d(be, layer.d),
      arena(be, layer.arena);
  Trace t;
  for (const std::vector<Segment>& segs : calls) {
    const size_t rows = RowsOf(segs);
    Array u(be, Random(rows * layer.Ldu(), seed += 10));
    Array y(be, std::vector<float>(rows * dims.ch * dims.h, kUnwritten));
    be.S4dScan(segs.data(), static_cast<int>(segs.size()), u.get(), layer.Ldu(),
               da.get(), c.get(), d.get(), arena.get(), layer.Stride(), dims.h,
               dims.m, dims.ch, dims.scale, y.get());
    const absl::Status status = be.TakeError();
    EXPECT_TRUE(status.ok()) << status;
    t.y.push_back(y.Read());
    t.arena.push_back(arena.Read());
  }
  return t;
}

TEST(S4dKernelsEmuTest, MatchesCpuOverMixedSegments) {
  for (const Dims& dims : {Dims{130, 32, 1, 2.0f, 0}, Dims{37, 5, 2, 1.0f, 0},
                           Dims{48, 16, 2, 2.0f, 3}, Dims{70, 8, 3, 2.0f, 0},
                           Dims{64, 4, 1, 1.0f, 1}, Dims{40, 64, 1, 1.0f, 0},
                           Dims{65, 32, 2, 2.0f, 2}}) {
    SCOPED_TRACE(testing::Message()
                 << "h=" << dims.h << " m=" << dims.m << " ch=" << dims.ch
                 << " pad=" << dims.pad);
    const Layer layer = MakeLayer(dims, 5, 100 + dims.h + dims.m);
    const auto calls = MixedCalls(dims.h * 3 + dims.m, 6, 9);
    auto cpu = MakeCpuBackend(1);
    S4dEmulation emu;
    const Trace want = RunCalls(*cpu, layer, calls, 200);
    const int64_t launches = emu::State().launches;
    const Trace got = RunCalls(emu, layer, calls, 200);
    EXPECT_EQ(emu::State().launches - launches,
              static_cast<int64_t>(calls.size()));
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_LE(MaxAbsDiff(want.y[i], got.y[i]), kTol) << "call " << i;
      EXPECT_LE(MaxAbsDiff(want.arena[i], got.arena[i]), kTol)
          << "state, call " << i;
    }
    EXPECT_GT(MaxAbsDiff(layer.arena, want.arena.back()), 0.0f);
    const size_t last = static_cast<size_t>(4 * layer.Stride());
    EXPECT_TRUE(std::equal(layer.arena.begin() + last, layer.arena.end(),
                           got.arena.back().begin() + last));
  }
}

}  // namespace
}  // namespace seqboat::emu_test
