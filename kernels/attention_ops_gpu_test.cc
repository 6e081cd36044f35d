// Sink + rolling-window attention on CUDA equals the CPU backend's over many
// successive steps: outputs within 1e-5 and the whole cache (counts, stored
// rows) byte for byte after every step. Steps mix decode rows, prefill chunks
// longer than the window (eviction inside the chunk) and zero-length padding
// segments on slot 0 while a real sequence also uses slot 0. A recorded
// decode step replays with fresh inputs and matches eager runs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/backend/attention_math.h"
#include "kernels/gpu_test_util.h"

namespace seqboat::gpu_test {
namespace {

namespace am = attention_math;

struct Config {
  int n_heads, n_kv_heads, head_dim, sinks, window;
  bool rope;
  std::string Name() const {
    return absl::StrCat("H", n_heads, "/", n_kv_heads, " d", head_dim, " S",
                        sinks, " W", window, rope ? " rope" : " norope");
  }
  int QDim() const { return n_heads * head_dim; }
  int KvDim() const { return n_kv_heads * head_dim; }
  // q, k, v side by side in one projection row, plus a few unused columns,
  // so the row strides differ from the widths.
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

// The layer's table: cos/sin of p·θ_i for every cache position p <= S + W.
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
        max_rows_(max_rows),
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
    ASSERT_LE(qkv.size(), static_cast<size_t>(max_rows_) * c_.Ld());
    be_.CopyToDevice(qkv_.get(), qkv.data(), qkv.size() * sizeof(float));
  }

  // The layer's pair of calls.
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
  std::vector<uint8_t> Cache() const { return cache_.ReadBytes(); }

 private:
  Backend& be_;
  Config c_;
  int max_rows_;
  Array qkv_, out_, cache_;
  std::unique_ptr<Array> cos_, sin_;
};

int64_t Count(const std::vector<uint8_t>& cache, int64_t slot_bytes, int slot) {
  int64_t n;
  std::memcpy(&n, cache.data() + slot * slot_bytes, sizeof(n));
  return n;
}

// Empty when equal; else where the first difference is.
std::string CacheDiff(const std::vector<uint8_t>& a,
                      const std::vector<uint8_t>& b, int64_t slot_bytes) {
  if (a.size() != b.size()) return "sizes differ";
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i] != b[i]) {
      return absl::StrCat("first difference at byte ", i, " (slot ",
                          static_cast<int64_t>(i) / slot_bytes, ", offset ",
                          static_cast<int64_t>(i) % slot_bytes, ")");
    }
  }
  return "";
}

// Segments packed in list order from row 0; zero-length segments on slot 0
// take one row each (never written, as a padded decode batch's rows).
struct StepPlan {
  std::vector<Segment> segs;
  int rows = 0;
  void Add(int slot, int len) {
    segs.push_back({slot, rows, len});
    rows += std::max(len, 1);
  }
};

// Runs the steps on the CPU and CUDA backends from the same random inputs
// and compares after each one.
void RunAndCompare(const Config& c, int slots,
                   const std::vector<StepPlan>& steps, uint32_t seed) {
  Pair p;
  ASSERT_NE(p.cuda, nullptr);
  int max_rows = 1;
  for (const StepPlan& s : steps) max_rows = std::max(max_rows, s.rows);
  Side cpu(*p.cpu, c, slots, max_rows), cuda(*p.cuda, c, slots, max_rows);
  for (size_t step = 0; step < steps.size(); ++step) {
    SCOPED_TRACE(absl::StrCat(c.Name(), ", step ", step));
    const std::vector<float> qkv =
        Random(static_cast<size_t>(steps[step].rows) * c.Ld(),
               seed + static_cast<uint32_t>(step), -2.0f, 2.0f);
    cpu.Upload(qkv);
    cuda.Upload(qkv);
    cpu.Step(steps[step].segs);
    cuda.Step(steps[step].segs);
    ASSERT_TRUE(p.cuda->TakeError().ok());
    EXPECT_LT(MaxAbsDiff(cpu.Out(), cuda.Out()), 1e-5f);
    const std::vector<uint8_t> want = cpu.Cache(), got = cuda.Cache();
    const std::string diff = CacheDiff(want, got, c.SlotBytes());
    ASSERT_EQ(diff, "");
  }
}

// Random steps over 4 slots: each step decodes or prefills a chunk (up to
// twice S + W, so eviction happens inside chunks) on slot 0 and a random
// subset of the others, in random order, with one or two zero-length
// segments on slot 0 among the real ones.
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

TEST(AttentionOpsGpuTest, SinkAndWindowMatchCpuOverManySteps) {
  const Config configs[] = {
      {8, 2, 64, 4, 16, true},    // GQA, sinks + window
      {8, 2, 64, 4, 16, false},   // no RoPE
      {4, 4, 32, 0, 16, true},    // MHA sliding window
      {4, 4, 128, 0, 16, false},  // MHA sliding window, d = 128
      {16, 1, 64, 2, 8, true},    // MQA: two head chunks per KV head
      {8, 1, 256, 4, 16, true},   // d = 256: two head chunks per KV head
      {6, 3, 96, 1, 5, true},     // d = 96: lanes with half-empty pairs
      {2, 1, 33, 2, 8, false},    // odd d without RoPE
      {2, 2, 512, 4, 0, true},    // sinks only (window 0), d = 512
  };
  uint32_t seed = 100;
  for (const Config& c : configs) {
    RunAndCompare(c, 4, RandomSteps(c, 24, seed), seed * 7);
    if (HasFatalFailure()) return;
    seed += 10;
  }
}

// A window of thousands: split keys (flash-decoding partials plus combine)
// for decode rows and for short prefill chunks; the decode steps carry slot
// 1 past S + W so its ring wraps.
TEST(AttentionOpsGpuTest, LongWindowSplitsMatchCpu) {
  const Config configs[] = {
      {8, 2, 64, 4, 2048, true},
      {4, 4, 128, 0, 1024, false},
  };
  for (const Config& c : configs) {
    const int total = c.sinks + c.window;
    std::vector<StepPlan> steps;
    // Slot 1 fills in chunks of 512 while slots 2 and 0 decode.
    for (int done = 0; done < total - 40; done += 512) {
      StepPlan s;
      s.Add(2, 1);
      s.Add(1, std::min(512, total - 40 - done));
      s.Add(0, 0);
      s.Add(0, 1);
      steps.push_back(s);
    }
    {
      StepPlan s;  // a short chunk: splits with several rows
      s.Add(2, 100);
      s.Add(0, 0);
      steps.push_back(s);
    }
    for (int i = 0; i < 70; ++i) {
      StepPlan s;
      s.Add(0, 1);
      s.Add(1, 1);
      s.Add(2, 1);
      s.Add(0, 0);
      steps.push_back(s);
    }
    RunAndCompare(c, 3, steps, 900);
    if (HasFatalFailure()) return;
  }
}

// A decode step recorded once (bucket of 4 with a zero-length segment on
// slot 0 while slot 0 also decodes) and replayed with fresh q/k/v and other
// slot orders gives what eager runs give, the split path included.
TEST(AttentionOpsGpuTest, RecordedDecodeStepMatchesEager) {
  const Config c{8, 2, 64, 4, 512, true};
  auto rec = MakeCuda(CudaWeights::kF32, /*graphs=*/true);
  auto eager = MakeCuda(CudaWeights::kF32, /*graphs=*/false);
  ASSERT_NE(rec, nullptr);
  ASSERT_NE(eager, nullptr);
  const int slots = 4, rows = 4;
  // No prefill splits its keys: the split workspace is first allocated while
  // the decode step is being recorded.
  const int prefill[slots] = {300, 600, 520, 300};
  Side sr(*rec, c, slots, 600), se(*eager, c, slots, 600);
  // Eager prefill first, so caches hold wrapped windows.
  for (int slot = 0; slot < slots; ++slot) {
    StepPlan s;
    s.Add(slot, prefill[slot]);
    const std::vector<float> qkv =
        Random(static_cast<size_t>(s.rows) * c.Ld(), 40 + slot, -2.0f, 2.0f);
    for (Side* side : {&sr, &se}) {
      side->Upload(qkv);
      side->Step(s.segs);
    }
  }
  ASSERT_TRUE(rec->TakeError().ok());
  ASSERT_TRUE(eager->TakeError().ok());
  std::vector<float> last;
  for (int step = 0; step < 12; ++step) {
    SCOPED_TRACE(absl::StrCat("step ", step));
    const int order[2][3] = {{1, 0, 2}, {3, 2, 0}};
    std::vector<Segment> segs;
    for (int i = 0; i < 3; ++i) segs.push_back({order[step % 2][i], i, 1});
    segs.push_back({0, 3, 0});
    const std::vector<float> qkv =
        Random(static_cast<size_t>(rows) * c.Ld(), 500 + step, -2.0f, 2.0f);
    sr.Upload(qkv);
    se.Upload(qkv);
    ASSERT_TRUE(rec->RunCaptured(rows,
                                 [&] {
                                   sr.Step(segs);
                                   return absl::OkStatus();
                                 })
                    .ok());
    se.Step(segs);
    ASSERT_TRUE(rec->TakeError().ok());
    ASSERT_TRUE(eager->TakeError().ok());
    const std::vector<float> out = sr.Out();
    EXPECT_LT(MaxAbsDiff(se.Out(), out), 1e-5f);
    ASSERT_EQ(CacheDiff(se.Cache(), sr.Cache(), c.SlotBytes()), "");
    if (step > 0) {
      EXPECT_GT(MaxAbsDiff(last, out), 0.0f);  // inputs changed
    }
    last = out;
  }
  const std::vector<uint8_t> cache = sr.Cache();
  EXPECT_EQ(Count(cache, c.SlotBytes(), 0), prefill[0] + 12);
  EXPECT_EQ(Count(cache, c.SlotBytes(), 1), prefill[1] + 6);
  EXPECT_EQ(Count(cache, c.SlotBytes(), 3), prefill[3] + 6);
}

}  // namespace
}  // namespace seqboat::gpu_test
