// The CPU sink-attention ops: packing several sequences into one step changes
// nothing, and the online softmax splits over keys (what a flash-decoding
// kernel relies on) without changing the result.
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "engine/backend/attention_math.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

namespace am = attention_math;

constexpr int kHq = 4, kHkv = 2, kDh = 6, kSinks = 2, kWindow = 5;

SinkCacheDims Dims() {
  SinkCacheDims d;
  d.n_heads = kHq;
  d.n_kv_heads = kHkv;
  d.head_dim = kDh;
  d.sinks = kSinks;
  d.window = kWindow;
  d.scale = 1.0f / std::sqrt(static_cast<float>(kDh));
  return d;
}

std::vector<float> Random(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 1.5f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

struct Rope {
  std::vector<float> cos, sin;
  Rope() {
    const int half = kDh / 2, rows = kSinks + kWindow + 1;
    for (int p = 0; p < rows; ++p) {
      for (int i = 0; i < half; ++i) {
        const float a = p * am::RopeInvFreq(i, kDh, 10000.0f);
        cos.push_back(std::cos(a));
        sin.push_back(std::sin(a));
      }
    }
  }
};

// Runs rows [q, k, v] of one step through attention and the cache append.
void Step(Backend& be, const std::vector<Segment>& segs, int n,
          const std::vector<float>& q, const std::vector<float>& k,
          const std::vector<float>& v, void* cache, int64_t slot_bytes,
          const Rope& rope, std::vector<float>* out) {
  out->assign(static_cast<size_t>(n) * kHq * kDh, 0.0f);
  SinkAttentionParams a;
  a.segs = segs.data();
  a.nsegs = static_cast<int>(segs.size());
  a.q = q.data();
  a.ldq = kHq * kDh;
  a.k = k.data();
  a.ldk = kHkv * kDh;
  a.v = v.data();
  a.ldv = kHkv * kDh;
  a.cache = cache;
  a.slot_bytes = slot_bytes;
  a.dims = Dims();
  a.rope_cos = rope.cos.data();
  a.rope_sin = rope.sin.data();
  a.out = out->data();
  be.SinkAttention(a);
  SinkAppendParams s;
  s.segs = a.segs;
  s.nsegs = a.nsegs;
  s.k = a.k;
  s.ldk = a.ldk;
  s.v = a.v;
  s.ldv = a.ldv;
  s.cache = cache;
  s.slot_bytes = slot_bytes;
  s.dims = a.dims;
  be.SinkCacheAppend(s);
}

TEST(SinkAttentionOpsTest, PackedSegmentsEqualSeparateRuns) {
  auto be = MakeCpuBackend(2);
  const Rope rope;
  const int64_t slot_bytes = am::CacheSlotBytes(kHkv, kDh, kSinks, kWindow);
  std::mt19937 rng(7);
  // Three sequences with different histories, then one packed step in which
  // they contribute 1, 9 and 3 rows (9 > sinks + window).
  const int history[3] = {0, 4, 12};
  const int step_len[3] = {1, 9, 3};
  const int slots[3] = {2, 0, 1};
  auto packed_cache = be->Alloc(slot_bytes * 3);
  ASSERT_TRUE(packed_cache.ok());
  std::vector<std::vector<float>> alone_out(3);
  std::vector<float> q_all, k_all, v_all;
  std::vector<Segment> segs;
  int rows = 0;
  for (int s = 0; s < 3; ++s) {
    auto alone_cache = be->Alloc(slot_bytes * 3);
    ASSERT_TRUE(alone_cache.ok());
    const auto hq = Random(history[s] * kHq * kDh, rng),
               hk = Random(history[s] * kHkv * kDh, rng),
               hv = Random(history[s] * kHkv * kDh, rng);
    std::vector<float> scratch;
    for (void* cache : {alone_cache->get(), packed_cache->get()}) {
      if (history[s] > 0) {
        Step(*be, {{slots[s], 0, history[s]}}, history[s], hq, hk, hv, cache,
             slot_bytes, rope, &scratch);
      }
    }
    const auto q = Random(step_len[s] * kHq * kDh, rng),
               k = Random(step_len[s] * kHkv * kDh, rng),
               v = Random(step_len[s] * kHkv * kDh, rng);
    Step(*be, {{slots[s], 0, step_len[s]}}, step_len[s], q, k, v,
         alone_cache->get(), slot_bytes, rope, &alone_out[s]);
    q_all.insert(q_all.end(), q.begin(), q.end());
    k_all.insert(k_all.end(), k.begin(), k.end());
    v_all.insert(v_all.end(), v.begin(), v.end());
    segs.push_back({slots[s], rows, step_len[s]});
    rows += step_len[s];
    // The slot this sequence used alone, compared after the packed step.
    std::vector<uint8_t> bytes(slot_bytes);
    std::memcpy(bytes.data(),
                static_cast<char*>(alone_cache->get()) + slots[s] * slot_bytes,
                slot_bytes);
    alone_out[s].insert(alone_out[s].end(),
                        reinterpret_cast<float*>(bytes.data() + 16),
                        reinterpret_cast<float*>(bytes.data() + slot_bytes));
  }
  std::vector<float> packed;
  Step(*be, segs, rows, q_all, k_all, v_all, packed_cache->get(), slot_bytes,
       rope, &packed);
  for (int s = 0; s < 3; ++s) {
    const int n_out = step_len[s] * kHq * kDh;
    for (int i = 0; i < n_out; ++i) {
      EXPECT_EQ(packed[segs[s].start * kHq * kDh + i], alone_out[s][i])
          << "sequence " << s << " output " << i;
    }
    const char* slot =
        static_cast<char*>(packed_cache->get()) + slots[s] * slot_bytes;
    int64_t count;
    std::memcpy(&count, slot, sizeof(count));
    EXPECT_EQ(count, history[s] + step_len[s]);
    const float* cache = reinterpret_cast<const float*>(slot + 16);
    for (int64_t i = 0; i < (slot_bytes - 16) / 4; ++i) {
      EXPECT_EQ(cache[i], alone_out[s][n_out + i]) << "sequence " << s;
    }
  }
}

// The output gate folded into the attention's last division is the product
// the separate ActivateMul(kSigmoid) made: the same bits.
TEST(SinkAttentionOpsTest, OutputGateEqualsTheSeparateSigmoidProduct) {
  auto be = MakeCpuBackend(2);
  const Rope rope;
  const int64_t slot_bytes = am::CacheSlotBytes(kHkv, kDh, kSinks, kWindow);
  std::mt19937 rng(11);
  const int n = 10, qd = kHq * kDh;
  const auto q = Random(n * qd, rng), k = Random(n * kHkv * kDh, rng),
             v = Random(n * kHkv * kDh, rng);
  // Rows of gates with a stride wider than the heads, as in the projection.
  const int ldgate = qd + 5;
  const auto gate = Random(static_cast<size_t>(n) * ldgate, rng);
  const std::vector<Segment> segs = {{1, 0, 4}, {0, 4, 6}};
  std::vector<float> plain(static_cast<size_t>(n) * qd),
      gated(static_cast<size_t>(n) * qd);
  for (std::vector<float>* out : {&plain, &gated}) {
    auto cache = be->Alloc(slot_bytes * 2);
    ASSERT_TRUE(cache.ok());
    SinkAttentionParams a;
    a.segs = segs.data();
    a.nsegs = 2;
    a.q = q.data();
    a.ldq = qd;
    a.k = k.data();
    a.ldk = kHkv * kDh;
    a.v = v.data();
    a.ldv = kHkv * kDh;
    a.cache = cache->get();
    a.slot_bytes = slot_bytes;
    a.dims = Dims();
    a.rope_cos = rope.cos.data();
    a.rope_sin = rope.sin.data();
    if (out == &gated) {
      a.gate = gate.data();
      a.ldgate = ldgate;
    }
    a.out = out->data();
    be->SinkAttention(a);
  }
  ActivateMulParams m;
  m.a = gate.data();
  m.lda = ldgate;
  m.b = plain.data();
  m.ldb = qd;
  m.n = n;
  m.f = qd;
  m.act = Activation::kSigmoid;
  m.out = plain.data();
  m.ldo = qd;
  be->ActivateMul(m);
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_EQ(gated[i], plain[i]) << "element " << i;
  }
}

TEST(SinkAttentionMathTest, KeySetMatchesTheTrimRule) {
  // Replays "append, then keep the first S and last W" and compares the
  // resulting key list and cache positions with the closed forms.
  for (int sinks : {0, 1, 3}) {
    for (int window : {0, 1, 4}) {
      if (sinks + window == 0) continue;
      std::vector<int64_t> cache;
      for (int64_t t = 0; t < 40; ++t) {
        std::vector<int64_t> keys = cache;
        keys.push_back(t);
        ASSERT_EQ(am::NumKeys(t, sinks, window),
                  static_cast<int64_t>(keys.size()))
            << sinks << "," << window << " t=" << t;
        EXPECT_EQ(am::QueryPosition(t, sinks, window),
                  static_cast<int64_t>(cache.size()));
        for (size_t u = 0; u < keys.size(); ++u) {
          EXPECT_EQ(am::KeyStreamIndex(t, u, sinks, window), keys[u]);
          EXPECT_EQ(am::KeyPosition(t, keys[u], sinks, window),
                    static_cast<int64_t>(u));
        }
        cache = keys;
        if (static_cast<int>(cache.size()) > sinks + window) {
          cache.erase(cache.begin() + sinks, cache.end() - window);
        }
      }
    }
  }
}

TEST(SinkAttentionMathTest, OnlineSoftmaxSplitsOverKeys) {
  std::mt19937 rng(3);
  const int d = 5, nk = 37;
  const auto scores = Random(nk, rng);
  const auto values = Random(nk * d, rng);
  float m = -INFINITY, l = 0;
  std::vector<float> acc(d, 0.0f), whole(d), split(d);
  for (int j = 0; j < nk; ++j) {
    am::OnlineSoftmaxAdd(&m, &l, acc.data(), scores[j], &values[j * d], d);
  }
  am::OnlineSoftmaxFinish(l, acc.data(), nullptr, d, whole.data());
  // Three parts, merged out of order, one of them empty.
  const int cuts[4] = {0, 11, 11, nk};
  float pm[3], pl[3];
  std::vector<float> pacc(3 * d, 0.0f);
  for (int p = 0; p < 3; ++p) {
    pm[p] = -INFINITY;
    pl[p] = 0;
    for (int j = cuts[p]; j < cuts[p + 1]; ++j) {
      am::OnlineSoftmaxAdd(&pm[p], &pl[p], &pacc[p * d], scores[j],
                           &values[j * d], d);
    }
  }
  float mm = -INFINITY, ml = 0;
  std::vector<float> macc(d, 0.0f);
  for (int p : {2, 1, 0}) {
    am::OnlineSoftmaxMerge(&mm, &ml, macc.data(), pm[p], pl[p], &pacc[p * d],
                           d);
  }
  am::OnlineSoftmaxFinish(ml, macc.data(), nullptr, d, split.data());
  // And the plain two-pass softmax in double.
  double mx = -INFINITY, sum = 0;
  for (float s : scores) mx = std::max<double>(mx, s);
  for (float s : scores) sum += std::exp(s - mx);
  for (int i = 0; i < d; ++i) {
    double want = 0;
    for (int j = 0; j < nk; ++j) {
      want += std::exp(scores[j] - mx) / sum * values[j * d + i];
    }
    EXPECT_NEAR(whole[i], want, 1e-5);
    EXPECT_NEAR(split[i], want, 1e-5);
  }
}

}  // namespace
}  // namespace seqboat
