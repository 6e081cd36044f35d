// Gated DeltaNet scan cases that the GPU parity test
// (kernels/cuda/gdn_ops_gpu_test.cc) and the emulation test
// (kernels/cuda/emu/gdn_kernels_emu_test.cc) both run: a layer's parameters
// and state arena, a step's inputs laid out as engine/layers/gdn.cc lays
// them out, the op called on any backend, and the comparison over a run of
// calls.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_GDN_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_GDN_CASES_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::gdn {

// Output rows no segment writes keep this value on both backends.
inline constexpr float kUnwritten = 7.0f;

struct Dims {
  int k_heads;
  int v_heads;  // a multiple of k_heads
  int k_dim;
  int v_dim;
  int pad;  // floats after each slot's state
};

inline int64_t KeyCols(const Dims& d) {
  return static_cast<int64_t>(d.k_heads) * d.k_dim;
}
inline int64_t ValueCols(const Dims& d) {
  return static_cast<int64_t>(d.v_heads) * d.v_dim;
}
// Columns of the post-conv [q ; k ; v] and of the projection's [z ; b ; a]
// part, as in engine/layers/gdn.cc.
inline int64_t QkvCols(const Dims& d) { return 2 * KeyCols(d) + ValueCols(d); }
inline int64_t ZbaCols(const Dims& d) { return ValueCols(d) + 2 * d.v_heads; }

// A layer's op parameters and its state arena: slot s's
// [v_heads, k_dim, v_dim] state at s * Stride().
struct HostLayer {
  Dims dims;
  int slots = 0;
  std::vector<float> a_coef, dt_bias, norm_w, arena;

  int64_t Stride() const { return ValueCols(dims) * dims.k_dim + dims.pad; }
};

inline HostLayer MakeLayer(const Dims& dims, int slots, uint32_t seed) {
  HostLayer l;
  l.dims = dims;
  l.slots = slots;
  // A = -exp(A_log) with A_log of HF's init, log uniform(0, 16).
  l.a_coef = Random(dims.v_heads, seed, -16.0f, -0.5f);
  l.dt_bias = Random(dims.v_heads, seed + 1, -1.0f, 0.5f);
  l.norm_w = Random(dims.v_dim, seed + 2, 0.5f, 1.5f);
  // Non-zero: the state of earlier steps.
  l.arena = Random(static_cast<size_t>(slots * l.Stride()), seed + 3);
  return l;
}

// One call: its segments and the rows of the packed batch.
struct HostStep {
  std::vector<Segment> segs;
  int rows = 0;
  std::vector<float> qkv;  // [rows, QkvCols]
  std::vector<float> zba;  // [rows, ZbaCols]
};

inline HostStep MakeStep(const Dims& dims, std::vector<Segment> segs,
                         uint32_t seed) {
  HostStep s;
  s.segs = std::move(segs);
  s.rows = RowsOf(s.segs);
  const size_t rows = s.rows;
  s.qkv = Random(rows * QkvCols(dims), seed, -1.0f, 1.0f);
  s.zba = Random(rows * ZbaCols(dims), seed + 1, -2.0f, 2.0f);
  return s;
}

inline std::vector<HostStep> MakeSteps(
    const Dims& dims, const std::vector<std::vector<Segment>>& calls,
    uint32_t seed) {
  std::vector<HostStep> steps;
  for (const std::vector<Segment>& segs : calls) {
    steps.push_back(MakeStep(dims, segs, seed += 10));
  }
  return steps;
}

struct DeviceLayer {
  DeviceLayer(Backend& be, const HostLayer& l)
      : host(l),
        a_coef(be, l.a_coef),
        dt_bias(be, l.dt_bias),
        norm_w(be, l.norm_w),
        arena(be, l.arena) {}
  const HostLayer& host;
  Array a_coef, dt_bias, norm_w, arena;
};

struct DeviceStep {
  DeviceStep(Backend& be, const Dims& dims, int rows)
      : qkv(be, static_cast<size_t>(rows) * QkvCols(dims)),
        zba(be, static_cast<size_t>(rows) * ZbaCols(dims)),
        out(be, std::vector<float>(static_cast<size_t>(rows) * ValueCols(dims),
                                   kUnwritten)) {}
  void Load(Backend& be, const HostStep& s) {
    be.CopyToDevice(qkv.get(), s.qkv.data(), s.qkv.size() * sizeof(float));
    be.CopyToDevice(zba.get(), s.zba.data(), s.zba.size() * sizeof(float));
  }
  Array qkv, zba, out;
};

inline GdnScanParams ScanParams(DeviceLayer& l, DeviceStep& s,
                                const std::vector<Segment>& segs) {
  const Dims& dims = l.host.dims;
  GdnScanParams p;
  p.segs = segs.data();
  p.nsegs = static_cast<int>(segs.size());
  p.qkv = s.qkv.get();
  p.ldqkv = static_cast<int>(QkvCols(dims));
  p.z = s.zba.get();
  p.b = s.zba.get() + ValueCols(dims);
  p.a = s.zba.get() + ValueCols(dims) + dims.v_heads;
  p.ldz = static_cast<int>(ZbaCols(dims));
  p.a_coef = l.a_coef.get();
  p.dt_bias = l.dt_bias.get();
  p.norm_w = l.norm_w.get();
  p.norm_eps = 1e-6f;
  p.state = l.arena.get();
  p.state_stride = l.host.Stride();
  p.k_heads = dims.k_heads;
  p.v_heads = dims.v_heads;
  p.k_dim = dims.k_dim;
  p.v_dim = dims.v_dim;
  p.out = s.out.get();
  p.ldo = static_cast<int>(ValueCols(dims));
  return p;
}

// What one backend produced: per call, the output and the arena afterwards.
struct Trace {
  std::vector<std::vector<float>> out, arena;
};

inline Trace RunSteps(Backend& be, const HostLayer& layer,
                      const std::vector<HostStep>& steps) {
  DeviceLayer l(be, layer);
  Trace t;
  for (const HostStep& step : steps) {
    DeviceStep s(be, layer.dims, step.rows);
    s.Load(be, step);
    be.GdnScan(ScanParams(l, s, step.segs));
    const absl::Status status = be.TakeError();
    EXPECT_TRUE(status.ok()) << status;
    t.out.push_back(s.out.Read());
    t.arena.push_back(l.arena.Read());
  }
  return t;
}

// The case both tests run: `calls` one after another on a layer of `dims`
// over 5 slots, on the reference `ref` and on `dut`, the backend under test.
// After every call the output and the whole arena are within `bound` of the
// reference's; the calls moved the state and left slot 4, which none of them
// uses, as it was.
inline void ExpectMatchOverCalls(Backend& ref, Backend& dut, const Dims& dims,
                                 const std::vector<std::vector<Segment>>& calls,
                                 const Bound& bound) {
  SCOPED_TRACE(testing::Message()
               << "k_heads=" << dims.k_heads << " v_heads=" << dims.v_heads
               << " k_dim=" << dims.k_dim << " v_dim=" << dims.v_dim);
  const HostLayer layer = MakeLayer(dims, 5, 100 + dims.v_heads + dims.k_dim);
  const std::vector<HostStep> steps = MakeSteps(dims, calls, 200);
  const Trace want = RunSteps(ref, layer, steps);
  const Trace got = RunSteps(dut, layer, steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_TRUE(Within(want.out[i], got.out[i], bound)) << "out, call " << i;
    EXPECT_TRUE(Within(want.arena[i], got.arena[i], bound))
        << "state, call " << i;
  }
  ExpectStateMovedAndUnusedSlotKept(layer.arena, want.arena.back(),
                                    got.arena.back(), layer.Stride());
}

}  // namespace seqboat::parity::gdn

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_GDN_CASES_H_
