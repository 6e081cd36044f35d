// Mamba2Step cases (the conv over xBC, the scan and the gated norm as one op)
// that the GPU parity test (kernels/cuda/mamba2_ops_gpu_test.cc) and the
// emulation test (kernels/cuda/emu/mamba2_kernels_emu_test.cc) both run: a
// layer's parameters and its [conv windows | ssm state] arena, a step's
// in_proj output, the op called with engine/layers/mamba2.cc's strides on any
// backend, and the comparison over a run of calls.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_MAMBA2_STEP_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_MAMBA2_STEP_CASES_H_

#include <cmath>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/mamba2_cases.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity::mamba2_step {

using mamba2::Dims;
using mamba2::DInner;
using mamba2::kUnwritten;
using mamba2::ProjCols;
using mamba2::XbcCols;

// A layer's parameters and arena, a slot laid out as the layer's:
// [conv windows XbcCols * (k - 1) | ssm heads * head_dim * n | pad].
struct HostLayer {
  Dims dims;
  int k = 0;  // conv taps
  int slots = 0;
  std::vector<float> conv_w, conv_b, dt_bias, a, d, norm_w, arena;

  int64_t ConvFloats() const { return XbcCols(dims) * (k - 1); }
  int64_t Stride() const {
    return ConvFloats() + DInner(dims) * dims.n + dims.pad;
  }
};

inline HostLayer MakeLayer(const Dims& dims, int k, int slots, uint32_t seed) {
  HostLayer l;
  l.dims = dims;
  l.k = k;
  l.slots = slots;
  l.conv_w = Random(static_cast<size_t>(XbcCols(dims) * k), seed, -0.5f, 0.5f);
  l.conv_b = Random(XbcCols(dims), seed + 1, -0.5f, 0.5f);
  l.dt_bias = Random(dims.heads, seed + 2, -1.0f, 0.5f);
  l.a = Random(dims.heads, seed + 3, -16.0f, -1.0f);
  l.d = Random(dims.heads, seed + 4, 0.5f, 1.5f);
  l.norm_w = Random(DInner(dims), seed + 5, 0.5f, 1.5f);
  // Non-zero windows and states: those of earlier steps.
  l.arena = Random(static_cast<size_t>(slots * l.Stride()), seed + 6);
  return l;
}

// One call: its segments and in_proj's output rows [z ; xBC ; δ].
struct HostStep {
  std::vector<Segment> segs;
  int rows = 0;
  std::vector<float> proj;
};

inline std::vector<HostStep> MakeSteps(
    const Dims& dims, const std::vector<std::vector<Segment>>& calls,
    uint32_t seed) {
  std::vector<HostStep> steps;
  for (const std::vector<Segment>& segs : calls) {
    HostStep s;
    s.segs = segs;
    s.rows = RowsOf(segs);
    s.proj = Random(static_cast<size_t>(s.rows * ProjCols(dims)), seed += 10,
                    -1.5f, 1.5f);
    steps.push_back(std::move(s));
  }
  return steps;
}

struct DeviceLayer {
  DeviceLayer(Backend& be, const HostLayer& l)
      : host(l),
        conv_w(be, l.conv_w),
        conv_b(be, l.conv_b),
        dt_bias(be, l.dt_bias),
        a(be, l.a),
        d(be, l.d),
        norm_w(be, l.norm_w),
        arena(be, l.arena) {}
  const HostLayer& host;
  Array conv_w, conv_b, dt_bias, a, d, norm_w, arena;
};

struct DeviceStep {
  DeviceStep(Backend& be, const Dims& dims, int rows)
      : proj(be, static_cast<size_t>(rows) * ProjCols(dims)),
        xbc(be, static_cast<size_t>(rows) * XbcCols(dims)),
        y(be, std::vector<float>(static_cast<size_t>(rows) * DInner(dims),
                                 kUnwritten)) {}
  void Load(Backend& be, const HostStep& s) {
    be.CopyToDevice(proj.get(), s.proj.data(), s.proj.size() * sizeof(float));
  }
  Array proj;
  Array xbc;  // the conv's output (the fused path leaves it unwritten)
  Array y;    // the scan's output, normed in place
};

// The op as engine/layers/mamba2.cc calls it for `rows` rows.
inline Mamba2StepParams StepParams(DeviceLayer& l, DeviceStep& s,
                                   const std::vector<Segment>& segs, int rows) {
  const Dims& dims = l.host.dims;
  const int e = static_cast<int>(DInner(dims));
  const int gn = dims.groups * dims.n;
  const int cc = static_cast<int>(XbcCols(dims));
  const int w = static_cast<int>(ProjCols(dims));
  Mamba2StepParams p;
  p.conv.segs = segs.data();
  p.conv.nsegs = static_cast<int>(segs.size());
  p.conv.x = s.proj.get() + e;
  p.conv.ldx = w;
  p.conv.state = l.arena.get();
  p.conv.state_stride = l.host.Stride();
  p.conv.w = l.conv_w.get();
  p.conv.bias = l.conv_b.get();
  p.conv.e = cc;
  p.conv.k = l.host.k;
  p.conv.out = s.xbc.get();
  Mamba2ScanParams& q = p.scan;
  q.segs = segs.data();
  q.nsegs = static_cast<int>(segs.size());
  q.x = s.xbc.get();
  q.b = s.xbc.get() + e;
  q.c = s.xbc.get() + e + gn;
  q.ldxbc = cc;
  q.dt = s.proj.get() + e + cc;
  q.lddt = w;
  q.dt_bias = l.dt_bias.get();
  q.a = l.a.get();
  q.d = l.d.get();
  q.dt_min = dims.clamp ? 0.4f : 0.0f;
  q.dt_max = dims.clamp ? 0.8f : std::numeric_limits<float>::infinity();
  q.state = l.arena.get() + l.host.ConvFloats();
  q.state_stride = l.host.Stride();
  q.heads = dims.heads;
  q.head_dim = dims.head_dim;
  q.n_state = dims.n;
  q.groups = dims.groups;
  q.out = s.y.get();
  q.ldo = e;
  GatedRmsNormParams& norm = p.norm;
  norm.y = s.y.get();
  norm.ldy = e;
  norm.z = s.proj.get();
  norm.ldz = w;
  norm.w = l.norm_w.get();
  norm.n = rows;
  norm.d = e;
  norm.groups = dims.groups;
  norm.eps = 1e-5f;
  norm.out = s.y.get();
  norm.ldo = e;
  return p;
}

// The rows of `out` ([rows, width]) that real segments cover, in segment
// order: the op leaves padding rows unspecified.
inline std::vector<float> RealRows(const std::vector<float>& out,
                                   const std::vector<Segment>& segs,
                                   int64_t width) {
  std::vector<float> rows;
  for (const Segment& seg : segs) {
    rows.insert(rows.end(), out.begin() + seg.start * width,
                out.begin() + (seg.start + seg.len) * width);
  }
  return rows;
}

// Per call, the normed output's real rows and the arena afterwards.
struct Trace {
  std::vector<std::vector<float>> o, arena;
};

// With `op_by_op`, the op's three ops are called one by one instead.
inline Trace RunSteps(Backend& be, const HostLayer& layer,
                      const std::vector<HostStep>& steps,
                      bool op_by_op = false) {
  DeviceLayer l(be, layer);
  Trace t;
  for (const HostStep& step : steps) {
    DeviceStep s(be, layer.dims, step.rows);
    s.Load(be, step);
    const Mamba2StepParams p = StepParams(l, s, step.segs, step.rows);
    if (op_by_op) {
      be.MambaConv(p.conv);
      be.Mamba2Scan(p.scan);
      be.GatedRmsNorm(p.norm);
    } else {
      be.Mamba2Step(p);
    }
    const absl::Status status = be.TakeError();
    EXPECT_TRUE(status.ok()) << status;
    t.o.push_back(RealRows(s.y.Read(), step.segs, DInner(layer.dims)));
    t.arena.push_back(l.arena.Read());
  }
  return t;
}

// `calls` one after another on a layer of `dims` and `k` taps over 5 slots,
// on the reference `ref` and on `dut`: after every call the normed output
// and the whole arena (windows and states) are within `bound` of the
// reference's; the calls moved the state and left slot 4 as it was. With
// `ref_op_by_op`, the reference calls the three ops one by one.
inline void ExpectMatchOverCalls(Backend& ref, Backend& dut, const Dims& dims,
                                 int k,
                                 const std::vector<std::vector<Segment>>& calls,
                                 const Bound& bound,
                                 bool ref_op_by_op = false) {
  SCOPED_TRACE(testing::Message()
               << "heads=" << dims.heads << " head_dim=" << dims.head_dim
               << " n=" << dims.n << " groups=" << dims.groups << " k=" << k);
  const HostLayer layer =
      mamba2_step::MakeLayer(dims, k, 5, 500 + dims.heads + dims.n);
  const std::vector<HostStep> steps = mamba2_step::MakeSteps(dims, calls, 600);
  const Trace want = RunSteps(ref, layer, steps, ref_op_by_op);
  const Trace got = RunSteps(dut, layer, steps);
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_TRUE(Within(want.o[i], got.o[i], bound)) << "output, call " << i;
    EXPECT_TRUE(Within(want.arena[i], got.arena[i], bound))
        << "state, call " << i;
  }
  ExpectStateMovedAndUnusedSlotKept(layer.arena, want.arena.back(),
                                    got.arena.back(), layer.Stride());
}

}  // namespace seqboat::parity::mamba2_step

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_MAMBA2_STEP_CASES_H_
