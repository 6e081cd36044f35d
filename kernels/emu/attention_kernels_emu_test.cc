// Sink + rolling-window attention kernels (kernels/attention_kernels.cu), run
// on the CUDA emulation, equal the CPU backend's ops over successive steps:
// outputs within a few ulp and the whole cache (counts, stored rows) byte for
// byte after every step. Steps mix decode rows, prefill chunks longer than
// the window (eviction inside the chunk) and zero-length padding segments on
// a slot a real segment also uses; long windows split the keys over blocks
// (partials plus the combine kernel) and wrap the ring.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/backend/attention_math.h"
#include "kernels/attention_kernels.h"
#include "kernels/attention_plan.h"
#include "kernels/emu/emu_test_util.h"

namespace seqboat::emu_test {
namespace {

namespace am = attention_math;

// Both sides fold keys with attention_math's online softmax, but in
// different orders: the kernel's warps take keys round-robin and merge (and
// split blocks merge again), its dot products are lane partials summed by a
// butterfly, while the CPU runs keys in order with a sequential dot. fp32
// rounding of that reordering stays within a few ulp of outputs of magnitude
// ~2 (seen: 1.2e-6); a wrong key, position or row is off by O(0.1) or
// more.
constexpr float kTol = 1e-5f;

// kernels/attention_ops.cc's launches, with its host planning
// (attention_plan.h), on host memory: the "staged" copies are the host
// arrays themselves.
class AttentionEmulation : public EmulatedBackend {
 public:
  void SinkAttention(const Segment* segs, int nsegs, const float* q, int ldq,
                     const float* k, int ldk, const float* v, int ldv,
                     const void* cache, int64_t slot_bytes,
                     const SinkCacheDims& dims, const float* rope_cos,
                     const float* rope_sin, float* out) override {
    const std::vector<cuda::SinkRow> items = cuda::SinkWorkItems(segs, nsegs);
    if (items.empty()) return;
    absl::StatusOr<cuda::SinkAttentionLaunch> launch =
        cuda::PlanSinkAttentionLaunch(
            segs, items.data(), static_cast<int>(items.size()), q, ldq, k, ldk,
            v, ldv, cache, slot_bytes, dims, rope_cos, rope_sin, out);
    ASSERT_TRUE(launch.ok()) << launch.status();
    max_splits_ = std::max(max_splits_, launch->params.splits);
    // NaN: a partial the combine reads but no block wrote shows.
    std::vector<float> workspace(launch->workspace_floats, NAN);
    if (!workspace.empty()) launch->params.workspace = workspace.data();
    cuda::LaunchSinkAttention(launch->params, nullptr);
  }

  void SinkCacheAppend(const Segment* segs, int nsegs, const float* k, int ldk,
                       const float* v, int ldv, void* cache, int64_t slot_bytes,
                       const SinkCacheDims& dims) override {
    const std::vector<cuda::SinkRow> items = cuda::SinkWorkItems(segs, nsegs);
    if (items.empty()) return;
    cuda::LaunchSinkCacheAppend(
        cuda::SinkAppendLaunch(segs, nsegs, items.data(),
                               static_cast<int>(items.size()), k, ldk, v, ldv,
                               cache, slot_bytes, dims),
        nullptr);
  }

  int max_splits() const { return max_splits_; }

 private:
  int max_splits_ = 1;
};

struct Config {
  int n_heads, n_kv_heads, head_dim, sinks, window;
  bool rope;
  std::string Name() const {
    return absl::StrCat("H", n_heads, "/", n_kv_heads, " d", head_dim, " S",
                        sinks, " W", window, rope ? " rope" : " norope");
  }
  int QDim() const { return n_heads * head_dim; }
  int KvDim() const { return n_kv_heads * head_dim; }
  // q, k, v side by side in one projection row plus unused columns, so the
  // row strides differ from the widths.
  int Ld() const { return QDim() + 2 * KvDim() + 3; }
  int64_t SlotBytes() const {
    return am::CacheSlotBytes(n_kv_heads, head_dim, sinks, window);
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

void RopeTables(const Config& c, std::vector<float>* cos_t,
                std::vector<float>* sin_t) {
  const int half = c.head_dim / 2;
  const int64_t positions = am::CacheRows(c.sinks, c.window) + 1;
  cos_t->resize(positions * half);
  sin_t->resize(positions * half);
  for (int64_t p = 0; p < positions; ++p) {
    for (int i = 0; i < half; ++i) {
      const float angle =
          static_cast<float>(p) * am::RopeInvFreq(i, c.head_dim, 10000.0f);
      (*cos_t)[p * half + i] = std::cos(angle);
      (*sin_t)[p * half + i] = std::sin(angle);
    }
  }
}

// One backend's buffers for a run of steps.
class Side {
 public:
  Side(Backend& be, const Config& c, int slots, int max_rows)
      : be_(be),
        c_(c),
        qkv_(be, static_cast<size_t>(max_rows) * c.Ld()),
        out_(be, std::vector<float>(static_cast<size_t>(max_rows) * c.QDim(),
                                    7.0f)),
        cache_(be, static_cast<size_t>(slots) * c.SlotBytes() / 4) {
    if (c.rope) {
      std::vector<float> cos_t, sin_t;
      RopeTables(c, &cos_t, &sin_t);
      cos_ = std::make_unique<Array>(be, cos_t);
      sin_ = std::make_unique<Array>(be, sin_t);
    }
  }

  void Upload(const std::vector<float>& qkv) {
    be_.CopyToDevice(qkv_.get(), qkv.data(), qkv.size() * sizeof(float));
  }

  void Step(const std::vector<Segment>& segs) {
    const int ld = c_.Ld(), nsegs = static_cast<int>(segs.size());
    const float* q = qkv_.get();
    const float* k = q + c_.QDim();
    const float* v = k + c_.KvDim();
    be_.SinkAttention(segs.data(), nsegs, q, ld, k, ld, v, ld, cache_.get(),
                      c_.SlotBytes(), c_.Dims(), cos_ ? cos_->get() : nullptr,
                      sin_ ? sin_->get() : nullptr, out_.get());
    be_.SinkCacheAppend(segs.data(), nsegs, k, ld, v, ld, cache_.get(),
                        c_.SlotBytes(), c_.Dims());
  }

  std::vector<float> Out() const { return out_.Read(); }
  std::vector<float> Cache() const { return cache_.Read(); }

 private:
  Backend& be_;
  Config c_;
  Array qkv_, out_, cache_;
  std::unique_ptr<Array> cos_, sin_;
};

// Empty when equal byte for byte; else where the first difference is.
std::string CacheDiff(const std::vector<float>& a, const std::vector<float>& b,
                      int64_t slot_bytes) {
  if (a.size() != b.size()) return "sizes differ";
  const auto* x = reinterpret_cast<const uint8_t*>(a.data());
  const auto* y = reinterpret_cast<const uint8_t*>(b.data());
  for (size_t i = 0; i < a.size() * sizeof(float); ++i) {
    if (x[i] != y[i]) {
      return absl::StrCat("first difference at byte ", i, " (slot ",
                          static_cast<int64_t>(i) / slot_bytes, ", offset ",
                          static_cast<int64_t>(i) % slot_bytes, ")");
    }
  }
  return "";
}

// Segments packed in list order from row 0; zero-length segments take one
// row each (never written, as a padded decode batch's rows).
struct StepPlan {
  std::vector<Segment> segs;
  int rows = 0;
  void Add(int slot, int len) {
    segs.push_back({slot, rows, len});
    rows += std::max(len, 1);
  }
};

// Runs the steps on both backends from the same random inputs, comparing
// after each one; returns the emulation's largest split count.
int RunAndCompare(const Config& c, int slots,
                  const std::vector<StepPlan>& steps, uint32_t seed) {
  auto cpu_be = MakeCpuBackend(1);
  AttentionEmulation emu;
  int max_rows = 1;
  for (const StepPlan& s : steps) max_rows = std::max(max_rows, s.rows);
  Side cpu(*cpu_be, c, slots, max_rows), gpu(emu, c, slots, max_rows);
  for (size_t step = 0; step < steps.size(); ++step) {
    SCOPED_TRACE(absl::StrCat(c.Name(), ", step ", step));
    const std::vector<float> qkv =
        Random(static_cast<size_t>(steps[step].rows) * c.Ld(),
               seed + static_cast<uint32_t>(step), -2.0f, 2.0f);
    cpu.Upload(qkv);
    gpu.Upload(qkv);
    cpu.Step(steps[step].segs);
    gpu.Step(steps[step].segs);
    const absl::Status status = emu.TakeError();
    EXPECT_TRUE(status.ok()) << status;
    EXPECT_LE(MaxAbsDiff(cpu.Out(), gpu.Out()), kTol);
    const std::string diff = CacheDiff(cpu.Cache(), gpu.Cache(), c.SlotBytes());
    EXPECT_EQ(diff, "");
    if (!diff.empty()) break;
  }
  return emu.max_splits();
}

// Random steps over 4 slots: slot 0 and a random subset of the others
// decode or prefill a chunk (up to twice S + W, so eviction happens inside
// chunks), in random order, with one or two zero-length segments on slot 0
// among the real ones.
std::vector<StepPlan> RandomSteps(const Config& c, int nsteps, uint32_t seed) {
  std::mt19937 gen(seed);
  const int long_chunk = 2 * (c.sinks + c.window) + 3;
  std::vector<StepPlan> steps;
  for (int step = 0; step < nsteps; ++step) {
    std::vector<std::pair<int, int>> real;  // (slot, len)
    for (int slot = 0; slot < 4; ++slot) {
      const int r = static_cast<int>(gen() % 10);
      int len = r < 2 && slot != 0 ? 0 : r < 7 ? 1 : 2 + gen() % long_chunk;
      if (step == 0 && slot == 1) len = c.sinks + c.window + 7;
      if (len > 0) real.push_back({slot, len});
    }
    std::shuffle(real.begin(), real.end(), gen);
    StepPlan plan;
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

TEST(AttentionKernelsEmuTest, SinkAndWindowMatchCpuOverManySteps) {
  const Config configs[] = {
      {8, 2, 64, 4, 16, true},    // GQA, sinks + window
      {8, 2, 64, 4, 16, false},   // no RoPE
      {4, 4, 32, 0, 16, true},    // MHA sliding window
      {4, 4, 128, 0, 16, false},  // d = 128
      {16, 1, 64, 2, 8, true},    // MQA: two head chunks per KV head
      {8, 1, 256, 4, 16, true},   // d = 256: two head chunks per KV head
      {6, 3, 96, 1, 5, true},     // d = 96: lanes with half-empty pairs
      {2, 1, 33, 2, 8, false},    // odd d without RoPE
      {2, 2, 512, 4, 0, true},    // sinks only (window 0), d = 512
  };
  uint32_t seed = 100;
  for (const Config& c : configs) {
    RunAndCompare(c, 4, RandomSteps(c, 8, seed), seed * 7);
    seed += 10;
  }
}

// Windows long enough that the keys split over blocks (partials plus the
// combine kernel), for decode rows and a short prefill chunk; slot 1 is
// filled past S + W so its ring wraps.
TEST(AttentionKernelsEmuTest, LongWindowSplitsMatchCpu) {
  const Config configs[] = {
      {6, 2, 80, 2, 300, true},
      {4, 4, 128, 0, 520, false},
  };
  for (const Config& c : configs) {
    SCOPED_TRACE(c.Name());
    const int total = c.sinks + c.window + 20;
    std::vector<StepPlan> steps;
    // Slot 1 fills in chunks of 128 while slots 2 and 0 decode.
    for (int done = 0; done < total; done += 128) {
      StepPlan s;
      s.Add(2, 1);
      s.Add(1, std::min(128, total - done));
      s.Add(0, 0);
      s.Add(0, 1);
      steps.push_back(s);
    }
    {
      StepPlan s;  // a short chunk: splits with several rows
      s.Add(2, 3);
      s.Add(0, 0);
      steps.push_back(s);
    }
    for (int i = 0; i < 4; ++i) {
      StepPlan s;
      s.Add(0, 1);
      s.Add(1, 1);
      s.Add(2, 1);
      s.Add(0, 0);
      steps.push_back(s);
    }
    EXPECT_GT(RunAndCompare(c, 3, steps, 900), 1) << "no step split its keys";
  }
}

}  // namespace
}  // namespace seqboat::emu_test
