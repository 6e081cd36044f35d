// The SeqBoat parity harness shared by the GPU test
// (kernels/seqboat_ops_gpu_test.cc) and the emulation test
// (kernels/emu/seqboat_kernels_emu_test.cc): shapes, step plans, router
// logits, the arena comparison and the step runner that drives Ema → Route →
// Attend → Mix on a reference backend and the backend under test. Kept in one
// place so both tests drive the kernels the same way and judge them by the
// same checks.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_SEQBOAT_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_SEQBOAT_CASES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/backend/backend.h"
#include "engine/backend/seqboat_math.h"
#include "engine/backend/seqboat_shape.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity {

// int32 arrays travel as float Arrays of the same bits.
inline std::unique_ptr<Array> IntArray(Backend& be,
                                       const std::vector<int32_t>& v) {
  std::vector<float> bits(std::max<size_t>(v.size(), 1));
  std::memcpy(bits.data(), v.data(), v.size() * sizeof(int32_t));
  return std::make_unique<Array>(be, bits);
}

inline std::vector<int32_t> ReadInts(const Array& a, size_t n) {
  const std::vector<uint8_t> bytes = a.ReadBytes();
  std::vector<int32_t> out(n);
  std::memcpy(out.data(), bytes.data(), n * sizeof(int32_t));
  return out;
}

// Every slot's integers (meta, positions) and padding exactly, its floats
// (EMA state, keys, values) within `tol`.
inline testing::AssertionResult SeqBoatArenasMatch(
    const std::vector<uint8_t>& cpu, const std::vector<uint8_t>& gpu,
    const SeqBoatShape& s, int slots, float tol) {
  if (cpu.size() != gpu.size()) {
    return testing::AssertionFailure() << "arena sizes differ";
  }
  const int64_t stride = op_math::SeqBoatStateBytes(s);
  const int64_t int_bytes = 8 * (op_math::kMetaCount + int64_t{s.w});
  const int64_t floats =
      int64_t{s.d} * s.ne + int64_t{s.w} * s.z + int64_t{s.w} * s.v;
  for (int slot = 0; slot < slots; ++slot) {
    const uint8_t* a = cpu.data() + slot * stride;
    const uint8_t* b = gpu.data() + slot * stride;
    for (int64_t i = 0; i < int_bytes / 8; ++i) {
      int64_t x, y;
      std::memcpy(&x, a + 8 * i, 8);
      std::memcpy(&y, b + 8 * i, 8);
      if (x != y) {
        return testing::AssertionFailure()
               << "slot " << slot << " int64 #" << i
               << (i < op_math::kMetaCount ? " (meta)" : " (pos)") << ": cpu "
               << x << " cuda " << y;
      }
    }
    for (int64_t i = 0; i < floats; ++i) {
      float x, y;
      std::memcpy(&x, a + int_bytes + 4 * i, 4);
      std::memcpy(&y, b + int_bytes + 4 * i, 4);
      if (!(std::fabs(x - y) <= tol)) {
        const int64_t ema = int64_t{s.d} * s.ne, keys = int64_t{s.w} * s.z;
        const char* what = i < ema ? "ema" : (i < ema + keys ? "keys" : "vals");
        return testing::AssertionFailure()
               << "slot " << slot << " float #" << i << " (" << what
               << "): cpu " << x << " cuda " << y;
      }
    }
    const int64_t tail = int_bytes + 4 * floats;
    if (std::memcmp(a + tail, b + tail, stride - tail) != 0) {
      return testing::AssertionFailure()
             << "slot " << slot << ": padding bytes differ";
    }
  }
  return testing::AssertionSuccess();
}

// The block's parameters and state arena on one backend.
struct SeqBoatSide {
  Backend* be = nullptr;
  std::unique_ptr<Array> in_coef, decay, out_coef, skip, temperature, gamma,
      beta, rel_bias, arena;
};

struct SeqBoatStepPlan {
  std::vector<Segment> segs;
  int n = 0;  // rows, padding rows included
  float p_active = 0.5f;
};

struct SeqBoatRun {
  SeqBoatShape shape;
  int slots = 1;
  int steps = 1;
  int max_chunk = 2;  // longest prefill chunk
  // Every slot prefills a chunk longer than w every step (so the FIFO wraps
  // inside a chunk) instead of a decode / chunk / absent mix.
  bool long_chunks = false;
  // Whether the steps push more than w tokens into every FIFO (checked).
  bool wraps = true;
  // Decode calls only (every segment one row or none), attended in the
  // decode form: activity from the device's compact, zrv over all rows.
  bool decode_form = false;
  uint32_t seed = 0;
};

// A packed batch: each slot is absent, decoding or prefilling a chunk in
// shuffled order, then 0-3 padding rows as zero-length segments on slot 0
// past the real rows.
inline SeqBoatStepPlan PlanSeqBoatStep(const SeqBoatRun& run, int step,
                                       std::mt19937& gen) {
  static constexpr float kActive[4] = {1.0f, 0.5f, 0.0f, 0.5f};
  SeqBoatStepPlan plan;
  plan.p_active = kActive[step % 4];
  std::vector<int> order(run.slots);
  for (int i = 0; i < run.slots; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), gen);
  std::uniform_real_distribution<float> u01(0.0f, 1.0f);
  std::uniform_int_distribution<int> chunk(2, run.max_chunk);
  const int w = run.shape.w;
  std::uniform_int_distribution<int> long_chunk(w + 1, w + 1 + w / 4);
  int rows = 0;
  for (int slot : order) {
    const float r = run.long_chunks ? 1.0f : u01(gen);
    if (r < 0.2f) continue;
    const int len = run.long_chunks                 ? long_chunk(gen)
                    : (run.decode_form || r < 0.6f) ? 1
                                                    : chunk(gen);
    plan.segs.push_back({slot, rows, len});
    rows += len;
  }
  const int pad = std::uniform_int_distribution<int>(0, 3)(gen);
  for (int i = 0; i < pad; ++i) plan.segs.push_back({0, rows + i, 0});
  plan.n = rows + pad;
  return plan;
}

// Router logits with about p_active of the rows active; among the inactive
// ones a few exact ties (u1 == u0 is inactive).
inline std::vector<float> SeqBoatRouterLogits(int n, int ldu, float p_active,
                                              std::mt19937& gen) {
  std::uniform_real_distribution<float> u01(0.0f, 1.0f), base(-2.0f, 2.0f),
      gap(0.01f, 3.0f);
  std::vector<float> u(static_cast<size_t>(std::max(n, 1)) * ldu, 0.5f);
  for (int i = 0; i < n; ++i) {
    float* ui = u.data() + static_cast<size_t>(i) * ldu;
    ui[0] = base(gen);
    const float r = u01(gen);
    if (r < p_active) {
      ui[1] = ui[0] + gap(gen);
    } else {
      ui[1] = u01(gen) < 0.15f ? ui[0] : ui[0] - gap(gen);
    }
  }
  return u;
}

// What the comparisons allow; each test says why its values hold.
struct SeqBoatTolerances {
  float state;  // the arena's floats
  float out;    // op outputs
  float conf;   // the router's confidences
  // The attention's bound is `out` times its largest |output| (at least 1):
  // relu² scores are unnormalised.
  bool attend_scales = false;
};

// Runs `steps` steps of Ema → Route → Attend → Mix on the reference backend
// `ref` and on `dev` and compares after every op.
inline void RunSeqBoatSteps(Backend& ref, Backend& dev, const SeqBoatRun& run,
                            const SeqBoatTolerances& tol) {
  const SeqBoatShape& s = run.shape;
  const int slots = run.slots;
  const uint32_t seed = run.seed;
  const int d = s.d, ne = s.ne, z = s.z, v = s.v;
  const int64_t stride = op_math::SeqBoatStateBytes(s);
  const bool simple = s.pos == SeqBoatPos::kSimpleBias;

  // EMA coefficients in the range trained models have (|φ| < 1, state O(1)).
  const std::vector<float> in_coef = Random(d * ne, seed + 1, -0.5f, 0.5f),
                           decay = Random(d * ne, seed + 2, 0.3f, 0.9f),
                           out_coef = Random(d * ne, seed + 3, -0.3f, 0.3f),
                           skip = Random(d, seed + 4), temperature = {0.7f},
                           gamma = Random(2 * z, seed + 5),
                           beta = Random(2 * z, seed + 6, -0.5f, 0.5f),
                           rel_bias = Random(simple ? 2 * s.rel_pos_max - 1 : 1,
                                             seed + 7);
  // A zeroed arena, except one slot far into its stream: RoPE offsets stay
  // small but the positions are ~1e9.
  std::vector<uint8_t> arena0(static_cast<size_t>(stride) * slots, 0);
  if (slots > 2) {
    op_math::SeqBoatSlot far =
        op_math::SeqBoatSlotAt(arena0.data() + 2 * stride, s);
    far.meta[op_math::kNextPos] = 1000000007;
  }
  std::vector<float> arena_floats(arena0.size() / 4);
  std::memcpy(arena_floats.data(), arena0.data(), arena0.size());

  SeqBoatSide side[2];
  for (int b = 0; b < 2; ++b) {
    SeqBoatSide& x = side[b];
    x.be = b == 0 ? &ref : &dev;
    x.in_coef = std::make_unique<Array>(*x.be, in_coef);
    x.decay = std::make_unique<Array>(*x.be, decay);
    x.out_coef = std::make_unique<Array>(*x.be, out_coef);
    x.skip = std::make_unique<Array>(*x.be, skip);
    x.temperature = std::make_unique<Array>(*x.be, temperature);
    x.gamma = std::make_unique<Array>(*x.be, gamma);
    x.beta = std::make_unique<Array>(*x.be, beta);
    x.rel_bias = std::make_unique<Array>(*x.be, rel_bias);
    x.arena = std::make_unique<Array>(*x.be, arena_floats);
  }

  // A CUDA error names the op, instead of surfacing as a mismatch later.
  auto cuda_ok = [&](const char* op) {
    const absl::Status e = dev.TakeError();
    return e.ok() ? testing::AssertionSuccess()
                  : testing::AssertionFailure() << op << ": " << e;
  };

  std::mt19937 gen(seed);
  const int ldu = 3, ldzrv = z + 2 * v + 5, ldg = d + 3;
  std::vector<int64_t> pushes(slots, 0);
  // Each side's running activated count (int64 in 8 zeroed bytes).
  std::unique_ptr<Array> activated_a[2];
  for (int b = 0; b < 2; ++b) {
    activated_a[b] =
        std::make_unique<Array>(*side[b].be, std::vector<float>(2));
  }
  int64_t activated_want = 0;
  for (int step = 0; step < run.steps; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const SeqBoatStepPlan plan = PlanSeqBoatStep(run, step, gen);
    const int n = plan.n, nsegs = static_cast<int>(plan.segs.size());
    const size_t rows = std::max(n, 1);
    const uint32_t step_seed = seed * 1000 + step * 10;

    // MD-EMA.
    const std::vector<float> x = Random(rows * d, step_seed + 1);
    std::vector<float> h[2];
    std::vector<uint8_t> arena[2];
    for (int b = 0; b < 2; ++b) {
      SeqBoatSide& e = side[b];
      Array xa(*e.be, x), ha(*e.be, rows * d);
      SeqBoatEmaParams p;
      p.segs = plan.segs.data();
      p.nsegs = nsegs;
      p.x = xa.get();
      p.state = e.arena->get();
      p.state_stride = stride;
      p.shape = s;
      p.in_coef = e.in_coef->get();
      p.decay = e.decay->get();
      p.out_coef = e.out_coef->get();
      p.skip = e.skip->get();
      p.h = ha.get();
      e.be->SeqBoatEma(p);
      h[b] = ha.Read();
      arena[b] = e.arena->ReadBytes();
    }
    ASSERT_TRUE(cuda_ok("SeqBoatEma"));
    EXPECT_LT(MaxAbsDiff(h[0], h[1]), tol.out) << "SeqBoatEma h";
    ASSERT_TRUE(SeqBoatArenasMatch(arena[0], arena[1], s, slots, tol.state))
        << "after SeqBoatEma";

    // Latent configurator.
    const std::vector<float> u =
        SeqBoatRouterLogits(n, ldu, plan.p_active, gen);
    std::vector<float> conf[2];
    std::vector<int32_t> compact[2], active[2];
    std::unique_ptr<Array> conf_a[2], compact_a[2], active_a[2];
    for (int b = 0; b < 2; ++b) {
      SeqBoatSide& e = side[b];
      Array ua(*e.be, u);
      conf_a[b] = std::make_unique<Array>(*e.be, rows);
      compact_a[b] = IntArray(*e.be, std::vector<int32_t>(rows, -5));
      active_a[b] = IntArray(*e.be, std::vector<int32_t>(n + 1, -7));
      SeqBoatRouteParams route;
      route.u = ua.get();
      route.ldu = ldu;
      route.n = n;
      route.temperature = e.temperature->get();
      route.conf = conf_a[b]->get();
      route.compact = reinterpret_cast<int32_t*>(compact_a[b]->get());
      route.active = reinterpret_cast<int32_t*>(active_a[b]->get());
      route.activated = reinterpret_cast<int64_t*>(activated_a[b]->get());
      e.be->SeqBoatRoute(route);
      conf[b] = conf_a[b]->Read();
      compact[b] = ReadInts(*compact_a[b], rows);
      active[b] = ReadInts(*active_a[b], n + 1);
    }
    ASSERT_TRUE(cuda_ok("SeqBoatRoute"));
    EXPECT_LE(MaxAbsDiff(conf[0], conf[1]), tol.conf) << "SeqBoatRoute conf";
    ASSERT_EQ(compact[0], compact[1]) << "SeqBoatRoute compact";
    ASSERT_EQ(active[0], active[1]) << "SeqBoatRoute active";
    const int m = active[0][0];
    activated_want += m;
    ASSERT_GE(m, 0);
    ASSERT_LE(m, n);
    if (plan.p_active == 0.0f) {
      EXPECT_EQ(m, 0);
    } else if (plan.p_active == 1.0f) {
      EXPECT_EQ(m, n);
    }

    // The layer's per-segment runs of active rows.
    std::vector<SeqBoatActiveRange> ranges(nsegs);
    const int32_t* first = active[0].data() + 1;
    for (int i = 0; i < nsegs; ++i) {
      const Segment& seg = plan.segs[i];
      const int32_t* lo = std::lower_bound(first, first + m, seg.start);
      const int32_t* hi =
          std::lower_bound(first, first + m, seg.start + seg.len);
      ranges[i] = {static_cast<int32_t>(lo - first),
                   static_cast<int32_t>(hi - lo)};
      if (seg.len > 0) pushes[seg.slot] += ranges[i].count;
    }

    // Working-memory attention.
    const size_t mrows = std::max(m, 1);
    const size_t zrows = run.decode_form ? rows : mrows;
    const std::vector<float> zrv = Random(zrows * ldzrv, step_seed + 2, -2, 2);
    std::vector<float> att[2];
    for (int b = 0; b < 2; ++b) {
      SeqBoatSide& e = side[b];
      Array za(*e.be, zrv), oa(*e.be, mrows * v);
      SeqBoatAttendParams p;
      p.segs = plan.segs.data();
      p.ranges = run.decode_form ? nullptr : ranges.data();
      p.nsegs = nsegs;
      p.active_rows = reinterpret_cast<const int32_t*>(active_a[b]->get()) + 1;
      if (run.decode_form) {
        p.compact = reinterpret_cast<const int32_t*>(compact_a[b]->get());
      }
      p.zrv = za.get();
      p.ldzrv = ldzrv;
      p.state = e.arena->get();
      p.state_stride = stride;
      p.shape = s;
      p.qk_gamma = e.gamma->get();
      p.qk_beta = e.beta->get();
      p.rel_bias = simple ? e.rel_bias->get() : nullptr;
      p.out = oa.get();
      e.be->SeqBoatAttend(p);
      att[b] = oa.Read();
      arena[b] = e.arena->ReadBytes();
    }
    ASSERT_TRUE(cuda_ok("SeqBoatAttend"));
    float att_scale = 1.0f;
    if (tol.attend_scales) {
      for (float a : att[0]) att_scale = std::max(att_scale, std::fabs(a));
    }
    EXPECT_LT(MaxAbsDiff(att[0], att[1]), tol.out * att_scale)
        << "SeqBoatAttend out";
    ASSERT_TRUE(SeqBoatArenasMatch(arena[0], arena[1], s, slots, tol.state))
        << "after SeqBoatAttend";

    // Output mix; every other step in place (out aliases s).
    const bool in_place = step % 2 == 1;
    const std::vector<float> res = Random(rows * d, step_seed + 3),
                             g = Random(rows * ldg, step_seed + 4),
                             y = Random(mrows * d, step_seed + 5, -3, 3);
    std::vector<float> mixed[2];
    for (int b = 0; b < 2; ++b) {
      SeqBoatSide& e = side[b];
      Array sa(*e.be, res), ga(*e.be, g), ya(*e.be, y), oa(*e.be, rows * d);
      SeqBoatMixParams mix;
      mix.s = sa.get();
      mix.g = ga.get();
      mix.ldg = ldg;
      mix.y = ya.get();
      mix.conf = conf_a[b]->get();
      mix.compact = reinterpret_cast<const int32_t*>(compact_a[b]->get());
      mix.n = n;
      mix.d = d;
      mix.out = in_place ? sa.get() : oa.get();
      e.be->SeqBoatMix(mix);
      mixed[b] = in_place ? sa.Read() : oa.Read();
    }
    ASSERT_TRUE(cuda_ok("SeqBoatMix"));
    EXPECT_LT(MaxAbsDiff(mixed[0], mixed[1]), tol.out) << "SeqBoatMix";
  }
  for (int b = 0; b < 2; ++b) {
    const std::vector<uint8_t> bytes = activated_a[b]->ReadBytes();
    int64_t got = 0;
    std::memcpy(&got, bytes.data(), sizeof(got));
    EXPECT_EQ(got, activated_want)
        << (b == 0 ? "reference" : "device") << " activated count";
  }
  // Every FIFO wrapped at least once.
  for (int slot = 0; run.wraps && slot < slots; ++slot) {
    EXPECT_GT(pushes[slot], s.w) << "slot " << slot;
  }
}

// A run over one block of this shape; SeqBoatRunWith sets the rest.
inline SeqBoatRun SeqBoatRunShape(int d, int ne, int z, int v, int w,
                                  SeqBoatAttnFn fn, SeqBoatPos pos,
                                  int rel_pos_max) {
  SeqBoatRun r;
  SeqBoatShape& s = r.shape;
  s.d = d;
  s.ne = ne;
  s.z = z;
  s.v = v;
  s.w = w;
  s.attn_fn = fn;
  s.pos = pos;
  s.rel_pos_max = rel_pos_max;
  return r;
}

inline SeqBoatRun SeqBoatRunWith(SeqBoatRun r, int slots, int steps,
                                 int max_chunk, uint32_t seed) {
  r.slots = slots;
  r.steps = steps;
  r.max_chunk = max_chunk;
  r.seed = seed;
  return r;
}

// The sizes of a trained block that a test can afford: value width v,
// window w, the simple bias table's half-width, the longest prefill chunk.
struct SeqBoatRealisticSize {
  int v, w, rel_pos_max, max_chunk;
};

// The realistic block (d 512, ne 16, z 128) over 6 slots for 24 steps with
// attention `fn` and positions `pos`.
inline SeqBoatRun SeqBoatRealisticRun(const SeqBoatRealisticSize& size,
                                      SeqBoatAttnFn fn, SeqBoatPos pos,
                                      uint32_t seed) {
  const int rel_pos_max = pos == SeqBoatPos::kSimpleBias ? size.rel_pos_max : 0;
  return SeqBoatRunWith(
      SeqBoatRunShape(512, 16, 128, size.v, size.w, fn, pos, rel_pos_max),
      /*slots=*/6, /*steps=*/24, size.max_chunk, seed);
}

// Odd sizes both tests run: z not a multiple of the warp, ne between the
// register variants and above them (the state-in-memory path), v smaller and
// larger than one warp, w = 1, bias tables smaller than the offsets.
struct NamedSeqBoatRun {
  const char* name;
  SeqBoatRun run;
};
inline std::vector<NamedSeqBoatRun> SeqBoatOddSizeRuns() {
  return {
      {"d 37 ne 5 z 6 v 19 w 3 softmax simple",
       SeqBoatRunWith(SeqBoatRunShape(37, 5, 6, 19, 3, SeqBoatAttnFn::kSoftmax,
                                      SeqBoatPos::kSimpleBias, 4),
                      4, 20, 9, 505)},
      {"d 70 ne 33 z 70 v 33 w 1 relu2 rope",
       SeqBoatRunWith(SeqBoatRunShape(70, 33, 70, 33, 1, SeqBoatAttnFn::kRelu2,
                                      SeqBoatPos::kRopeInterleaved, 0),
                      4, 16, 5, 606)},
      {"d 129 ne 1 z 2 v 1 w 5 softmax rope",
       SeqBoatRunWith(SeqBoatRunShape(129, 1, 2, 1, 5, SeqBoatAttnFn::kSoftmax,
                                      SeqBoatPos::kRopeInterleaved, 0),
                      3, 20, 12, 707)},
      {"d 33 ne 20 z 130 v 600 w 40 relu2 simple",
       SeqBoatRunWith(
           SeqBoatRunShape(33, 20, 130, 600, 40, SeqBoatAttnFn::kRelu2,
                           SeqBoatPos::kSimpleBias, 7),
           3, 20, 60, 808)},
  };
}

// A window whose scores need more than the default 48 KiB of shared memory
// (the kernel opts in to more): 4 steps over `slots` slots with chunks of up
// to max_chunk rows.
inline SeqBoatRun SeqBoatLargeWindowRun(int slots, int max_chunk) {
  return SeqBoatRunWith(
      SeqBoatRunShape(48, 4, 4, 6, 7000, SeqBoatAttnFn::kSoftmax,
                      SeqBoatPos::kSimpleBias, 100),
      slots, /*steps=*/4, max_chunk, 909);
}

// Decode calls only, in the attention's decode form (no host ranges): 6
// slots, each absent or one row per step, enough steps to wrap every FIFO.
inline SeqBoatRun SeqBoatDecodeFormRun(const SeqBoatRealisticSize& size,
                                       SeqBoatAttnFn fn, SeqBoatPos pos,
                                       uint32_t seed) {
  SeqBoatRun r = SeqBoatRealisticRun(size, fn, pos, seed);
  r.decode_form = true;
  r.steps = 6 * size.w;
  return r;
}

// More rows than one block's threads: the compaction carries its count
// across chunks; n == 0 still writes the count. Confidences within
// `conf_tol`, the decisions exactly.
inline void RouteOverManyRows(Backend& ref, Backend& dev, float conf_tol) {
  std::mt19937 gen(11);
  for (int n : {0, 1, 31, 1024, 1025, 3000}) {
    SCOPED_TRACE("n " + std::to_string(n));
    const std::vector<float> u = SeqBoatRouterLogits(n, 2, 0.5f, gen);
    const size_t rows = std::max(n, 1);
    std::vector<float> conf[2];
    std::vector<int32_t> compact[2], active[2];
    int b = 0;
    for (Backend* be : {&ref, &dev}) {
      Array ua(*be, u), ta(*be, std::vector<float>{1.3f}), ca(*be, rows);
      auto cp = IntArray(*be, std::vector<int32_t>(rows, -5));
      auto ac = IntArray(*be, std::vector<int32_t>(n + 1, -7));
      SeqBoatRouteParams route2;
      route2.u = ua.get();
      route2.ldu = 2;
      route2.n = n;
      route2.temperature = ta.get();
      route2.conf = ca.get();
      route2.compact = reinterpret_cast<int32_t*>(cp->get());
      route2.active = reinterpret_cast<int32_t*>(ac->get());
      be->SeqBoatRoute(route2);
      conf[b] = ca.Read();
      compact[b] = ReadInts(*cp, rows);
      active[b] = ReadInts(*ac, n + 1);
      ++b;
    }
    EXPECT_LE(MaxAbsDiff(conf[0], conf[1]), conf_tol);
    EXPECT_EQ(compact[0], compact[1]);
    EXPECT_EQ(active[0], active[1]);
  }
  const absl::Status e = dev.TakeError();
  EXPECT_TRUE(e.ok()) << e;
}

// The bounds of every SeqBoat case, on the device and the emulation alike:
// the per-element math is shared, but reductions (warp sums over lanes'
// shares, the CPU's sequential loops) and the CPU's -ffast-math build round
// differently; an indexing or FIFO error is O(1). The attention's bound
// scales with its outputs: relu² scores are unnormalised (outputs of a few
// hundred at odd sizes), and the kernel's lane-partial dot products round
// differently from the CPU's sequential ones (seen on an H200: 1.4e-4 at
// d 70, w 1, relu², RoPE). conf = σ((u1 − u0)/τ) goes through expf, which
// CUDA computes within 2 ulp of libm's and the CPU build may vectorise: conf
// (in [0.5, 1)) may differ in its last bit or two. The router's decisions
// are comparisons of the same floats: exact.
inline constexpr float kSeqBoatConfTol = 2.5e-7f;
inline constexpr SeqBoatTolerances kSeqBoatTolerances = {
    /*state=*/1e-5f, /*out=*/1e-4f, kSeqBoatConfTol, /*attend_scales=*/true};

// What a test binary runs the SeqBoat cases (SeqBoatParityTest) with: the
// backend under test, and the sizes it can afford.
struct SeqBoatTarget {
  const char* name;  // the test names' parameter
  // A new backend under test; null, with a test failure, if none can be
  // made.
  std::function<std::unique_ptr<Backend>()> make;
  // The realistic block's value width, window and longest chunk.
  SeqBoatRealisticSize realistic;
  // A window whose scores need more than the default 48 KiB of shared
  // memory.
  SeqBoatRun large_window;
};

inline void PrintTo(const SeqBoatTarget& target, std::ostream* os) {
  *os << target.name;
}

inline std::string SeqBoatTargetName(
    const testing::TestParamInfo<SeqBoatTarget>& info) {
  return info.param.name;
}

// The cases both the GPU test and the emulation test run
// (seqboat_cases.cc), each binary instantiating them with its target:
//   INSTANTIATE_TEST_SUITE_P(Suite, SeqBoatParityTest,
//                            testing::Values(target), SeqBoatTargetName);
class SeqBoatParityTest : public testing::TestWithParam<SeqBoatTarget> {
 protected:
  // `run` on a new CPU backend (the reference) and a new backend under
  // test.
  void RunSteps(const SeqBoatRun& run) {
    const std::unique_ptr<Backend> ref = MakeCpuBackend(1);
    const std::unique_ptr<Backend> dut = GetParam().make();
    ASSERT_NE(dut, nullptr);
    RunSeqBoatSteps(*ref, *dut, run, kSeqBoatTolerances);
  }
};

}  // namespace seqboat::parity

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_SEQBOAT_CASES_H_
