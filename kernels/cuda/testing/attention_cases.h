// The sink-attention parity harness shared by the GPU test
// (kernels/attention_ops_gpu_test.cc) and the emulation test
// (kernels/emu/attention_kernels_emu_test.cc): shapes, the layer's pair of
// calls on one backend, step plans, and the step-by-step comparison against
// a reference backend. Kept in one place so both tests drive the kernels the
// same way and judge them by the same checks.
#ifndef SEQBOAT_KERNELS_CUDA_TESTING_ATTENTION_CASES_H_
#define SEQBOAT_KERNELS_CUDA_TESTING_ATTENTION_CASES_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/attention_math.h"
#include "engine/backend/backend.h"
#include "gtest/gtest.h"
#include "kernels/cuda/testing/parity_util.h"

namespace seqboat::parity {

struct SinkConfig {
  int n_heads, n_kv_heads, head_dim, sinks, window;
  bool rope;
  // Channels rotated (partial rotary, engine/layers/rope.h); 0: all.
  int rotary_dim = 0;
  // An output gate (Qwen3.5's) after v in the projection row.
  bool gate = false;
  // Per-head RMS norms of q and k (Qwen3's).
  bool qk_norm = false;
  std::string Name() const {
    return absl::StrCat("H", n_heads, "/", n_kv_heads, " d", head_dim, " S",
                        sinks, " W", window, rope ? " rope" : " norope",
                        rotary_dim ? absl::StrCat(" rot", rotary_dim) : "",
                        gate ? " gate" : "", qk_norm ? " qk_norm" : "");
  }
  int QDim() const { return n_heads * head_dim; }
  int KvDim() const { return n_kv_heads * head_dim; }
  // q, k, v (and the gate) side by side in one projection row, plus a few
  // unused columns, so the row strides differ from the widths.
  int Ld() const { return (gate ? 2 : 1) * QDim() + 2 * KvDim() + 3; }
  int64_t SlotBytes() const {
    return attention_math::CacheSlotBytes(n_kv_heads, head_dim, sinks, window);
  }
  SinkCacheDims Dims() const {
    SinkCacheDims d;
    d.n_heads = n_heads;
    d.n_kv_heads = n_kv_heads;
    d.head_dim = head_dim;
    d.sinks = sinks;
    d.window = window;
    d.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    return d;
  }
};

// The layer's table: cos/sin of p·θ_i for every cache position p <= S + W;
// with partial rotary, the passed pairs hold cos 1, sin 0.
inline void SinkRopeTables(const SinkConfig& c, std::vector<float>* cos_t,
                           std::vector<float>* sin_t) {
  namespace am = attention_math;
  const int half = c.head_dim / 2;
  const int rotary = c.rotary_dim ? c.rotary_dim : c.head_dim;
  const int64_t positions = am::CacheRows(c.sinks, c.window) + 1;
  cos_t->assign(positions * half, 1.0f);
  sin_t->assign(positions * half, 0.0f);
  for (int64_t p = 0; p < positions; ++p) {
    for (int i = 0; i < rotary / 2; ++i) {
      const float angle =
          static_cast<float>(p) * am::RopeInvFreq(i, rotary, 10000.0f);
      (*cos_t)[p * half + i] = std::cos(angle);
      (*sin_t)[p * half + i] = std::sin(angle);
    }
  }
}

// One backend's buffers for a run of steps.
class SinkSide {
 public:
  SinkSide(Backend& be, const SinkConfig& c, int slots, int max_rows)
      : be_(be),
        c_(c),
        max_rows_(max_rows),
        qkv_(be, static_cast<size_t>(max_rows) * c.Ld()),
        out_(be, std::vector<float>(static_cast<size_t>(max_rows) * c.QDim(),
                                    7.0f)),
        cache_(be, static_cast<size_t>(slots) * c.SlotBytes() / 4) {
    if (c.rope) {
      std::vector<float> cos_t, sin_t;
      SinkRopeTables(c, &cos_t, &sin_t);
      cos_ = std::make_unique<Array>(be, cos_t);
      sin_ = std::make_unique<Array>(be, sin_t);
    }
    if (c.qk_norm) {
      q_norm_ = std::make_unique<Array>(
          be, Random(static_cast<size_t>(c.head_dim), 31, 0.5f, 1.5f));
      k_norm_ = std::make_unique<Array>(
          be, Random(static_cast<size_t>(c.head_dim), 37, 0.5f, 1.5f));
    }
  }

  void Upload(const std::vector<float>& qkv) {
    ASSERT_LE(qkv.size(), static_cast<size_t>(max_rows_) * c_.Ld());
    be_.CopyToDevice(qkv_.get(), qkv.data(), qkv.size() * sizeof(float));
  }

  // The layer's pair of calls.
  void Step(const std::vector<Segment>& segs) {
    const int ld = c_.Ld(), nsegs = static_cast<int>(segs.size());
    const float* q = qkv_.get();
    const float* k = q + c_.QDim();
    const float* v = k + c_.KvDim();
    SinkAttentionParams a;
    a.segs = segs.data();
    a.nsegs = nsegs;
    a.q = q;
    a.ldq = ld;
    a.k = k;
    a.ldk = ld;
    a.v = v;
    a.ldv = ld;
    a.cache = cache_.get();
    a.slot_bytes = c_.SlotBytes();
    a.dims = c_.Dims();
    a.rope_cos = cos_ ? cos_->get() : nullptr;
    a.rope_sin = sin_ ? sin_->get() : nullptr;
    if (c_.gate) {
      a.gate = v + c_.KvDim();
      a.ldgate = ld;
    }
    if (c_.qk_norm) {
      a.norms.q_w = q_norm_->get();
      a.norms.k_w = k_norm_->get();
      a.norms.eps = 1e-6f;
    }
    a.out = out_.get();
    be_.SinkAttention(a);
    SinkAppendParams s;
    s.segs = a.segs;
    s.nsegs = nsegs;
    s.k = k;
    s.ldk = ld;
    s.v = v;
    s.ldv = ld;
    s.cache = cache_.get();
    s.slot_bytes = c_.SlotBytes();
    s.dims = c_.Dims();
    s.norms.k_w = a.norms.k_w;
    s.norms.eps = a.norms.eps;
    be_.SinkCacheAppend(s);
  }

  std::vector<float> Out() const { return out_.Read(); }
  std::vector<uint8_t> Cache() const { return cache_.ReadBytes(); }

 private:
  Backend& be_;
  SinkConfig c_;
  int max_rows_;
  Array qkv_, out_, cache_;
  std::unique_ptr<Array> cos_, sin_, q_norm_, k_norm_;
};

// Slot `slot`'s token count in a cache read back with SinkSide::Cache().
inline int64_t SinkCount(const std::vector<uint8_t>& cache, int64_t slot_bytes,
                         int slot) {
  int64_t n;
  std::memcpy(&n, cache.data() + slot * slot_bytes, sizeof(n));
  return n;
}

// Empty when equal byte for byte, or with tol > 0 when the counts are and
// the stored floats are within tol (keys the backends norm each their own
// way); else where the first difference is.
inline std::string SinkCacheDiff(const std::vector<uint8_t>& a,
                                 const std::vector<uint8_t>& b,
                                 int64_t slot_bytes, float tol = 0.0f) {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    const int64_t offset = static_cast<int64_t>(i) % slot_bytes;
    bool same = a[i] == b[i];
    if (!same && tol > 0.0f && offset >= attention_math::kCacheHeaderBytes) {
      const size_t at = i - (offset - attention_math::kCacheHeaderBytes) % 4;
      float x, y;
      std::memcpy(&x, a.data() + at, sizeof(x));
      std::memcpy(&y, b.data() + at, sizeof(y));
      same = std::fabs(x - y) <= tol;
    }
    if (!same) {
      return absl::StrCat("first difference at byte ", i, " (slot ",
                          static_cast<int64_t>(i) / slot_bytes, ", offset ",
                          offset, ")");
    }
  }
  return "";
}

// Segments packed in list order from row 0; zero-length segments take one
// row each (never written, as a padded decode batch's rows).
struct SinkStepPlan {
  std::vector<Segment> segs;
  int rows = 0;
  void Add(int slot, int len) {
    segs.push_back({slot, rows, len});
    rows += std::max(len, 1);
  }
};

// A case: steps of one configuration over `slots` slots, their inputs drawn
// from `seed`.
struct SinkRun {
  SinkConfig config;
  int slots = 0;
  std::vector<SinkStepPlan> steps;
  uint32_t seed = 0;
};

// Runs the steps on the reference backend `ref` and on `dev` from the same
// random inputs, comparing after each one: outputs within `tol`, the whole
// cache byte for byte.
inline void RunSinkSteps(Backend& ref, Backend& dev, const SinkRun& run,
                         float tol) {
  const SinkConfig& c = run.config;
  const std::vector<SinkStepPlan>& steps = run.steps;
  int max_rows = 1;
  for (const SinkStepPlan& s : steps) max_rows = std::max(max_rows, s.rows);
  SinkSide want(ref, c, run.slots, max_rows), got(dev, c, run.slots, max_rows);
  for (size_t step = 0; step < steps.size(); ++step) {
    SCOPED_TRACE(absl::StrCat(c.Name(), ", step ", step));
    const std::vector<float> qkv =
        Random(static_cast<size_t>(steps[step].rows) * c.Ld(),
               run.seed + static_cast<uint32_t>(step), -2.0f, 2.0f);
    want.Upload(qkv);
    got.Upload(qkv);
    want.Step(steps[step].segs);
    got.Step(steps[step].segs);
    const absl::Status status = dev.TakeError();
    ASSERT_TRUE(status.ok()) << status;
    EXPECT_LT(MaxAbsDiff(want.Out(), got.Out()), tol);
    ASSERT_EQ(SinkCacheDiff(want.Cache(), got.Cache(), c.SlotBytes(),
                            c.qk_norm ? tol : 0.0f),
              "");
  }
}

// Random steps over 4 slots: each step decodes or prefills a chunk (up to
// twice S + W, so eviction happens inside chunks) on slot 0 and a random
// subset of the others, in random order, with one or two zero-length
// segments on slot 0 among the real ones.
inline std::vector<SinkStepPlan> RandomSinkSteps(const SinkConfig& c,
                                                 int nsteps, uint32_t seed) {
  std::mt19937 gen(seed);
  const int long_chunk = 2 * (c.sinks + c.window) + 3;
  std::vector<SinkStepPlan> steps;
  for (int step = 0; step < nsteps; ++step) {
    std::vector<std::pair<int, int>> real;  // (slot, len)
    for (int slot = 0; slot < 4; ++slot) {
      const int r = static_cast<int>(gen() % 10);
      int len = r < 2 && slot != 0 ? 0 : r < 7 ? 1 : 2 + gen() % long_chunk;
      if (step == 0 && slot == 1) len = c.sinks + c.window + 7;
      if (len > 0) real.push_back({slot, len});
    }
    std::shuffle(real.begin(), real.end(), gen);
    SinkStepPlan plan;
    const int pads = 1 + static_cast<int>(gen() % 2);
    const int pad_at = static_cast<int>(gen() % (real.size() + 1));
    for (size_t i = 0; i <= real.size(); ++i) {
      if (static_cast<int>(i) == pad_at) plan.Add(0, 0);
      if (i < real.size()) plan.Add(real[i].first, real[i].second);
    }
    if (pads == 2) plan.Add(0, 0);
    steps.push_back(plan);
  }
  return steps;
}

// The configurations both tests sweep over many steps.
inline std::vector<SinkConfig> SinkSweepConfigs() {
  return {
      {8, 2, 64, 4, 16, true},           // GQA, sinks + window
      {8, 2, 64, 4, 16, false},          // no RoPE
      {4, 4, 32, 0, 16, true},           // MHA sliding window
      {4, 4, 128, 0, 16, false},         // MHA sliding window, d = 128
      {16, 1, 64, 2, 8, true},           // MQA: two head chunks per KV head
      {8, 1, 256, 4, 16, true},          // d = 256: two head chunks per KV head
      {6, 3, 96, 1, 5, true},            // d = 96: lanes with half-empty pairs
      {2, 1, 33, 2, 8, false},           // odd d without RoPE
      {2, 2, 512, 4, 0, true},           // sinks only (window 0), d = 512
      {4, 2, 128, 4, 16, true, 64},      // Bamba: half of each head rotated
      {8, 2, 64, 4, 16, true, 0, true},  // Qwen3.5: output gate
      {8, 2, 256, 4, 16, true, 64, true, true},  // Qwen3.5: all of it
      {6, 3, 96, 1, 5, true, 0, false, true},    // qk norm, half-empty pairs
  };
}

// The sweep both tests run, `nsteps` random steps of each SinkSweepConfigs
// configuration over 4 slots.
inline std::vector<SinkRun> SinkSweepRuns(int nsteps) {
  std::vector<SinkRun> runs;
  uint32_t seed = 100;
  for (const SinkConfig& c : SinkSweepConfigs()) {
    runs.push_back({c, 4, RandomSinkSteps(c, nsteps, seed), seed * 7});
    seed += 10;
  }
  return runs;
}

// Steps over 3 slots whose keys split over blocks when the window is long:
// slot 1 fills to S + W - `short_by` in chunks of `chunk` rows while slots 2
// and 0 decode (slot 0 beside a zero-length segment), then slot 2 runs a
// chunk of `short_rows` rows (splits with several rows), then `decodes`
// decode steps on all three carry slot 1's ring past S + W.
inline std::vector<SinkStepPlan> LongWindowSinkSteps(const SinkConfig& c,
                                                     int short_by, int chunk,
                                                     int short_rows,
                                                     int decodes) {
  const int total = c.sinks + c.window - short_by;
  std::vector<SinkStepPlan> steps;
  for (int done = 0; done < total; done += chunk) {
    SinkStepPlan s;
    s.Add(2, 1);
    s.Add(1, std::min(chunk, total - done));
    s.Add(0, 0);
    s.Add(0, 1);
    steps.push_back(s);
  }
  {
    SinkStepPlan s;
    s.Add(2, short_rows);
    s.Add(0, 0);
    steps.push_back(s);
  }
  for (int i = 0; i < decodes; ++i) {
    SinkStepPlan s;
    s.Add(0, 1);
    s.Add(1, 1);
    s.Add(2, 1);
    s.Add(0, 0);
    steps.push_back(s);
  }
  return steps;
}

// LongWindowSinkSteps as the case both tests run on their long windows.
inline SinkRun LongWindowSinkRun(const SinkConfig& c, int short_by, int chunk,
                                 int short_rows, int decodes) {
  return {c, 3, LongWindowSinkSteps(c, short_by, chunk, short_rows, decodes),
          900};
}

}  // namespace seqboat::parity

#endif  // SEQBOAT_KERNELS_CUDA_TESTING_ATTENTION_CASES_H_
