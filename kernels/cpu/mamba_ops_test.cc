// Mamba-1's conv on the CPU gives a token the same bits whichever path runs
// it: a one-token segment (decode rows' pass over whole slots) or a token of
// a longer segment (the block loop), and on either instruction set the
// processor runs. Speculative rounds rely on it: the state after verifying a
// draft in one segment must be the state of decoding its tokens one by one.
// The fast-math build may vectorise the two paths' loops differently, so
// their sums are explicit fmas and their SiLU one function.
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/backend/mamba_params.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"

namespace seqboat {
namespace {

struct ConvRun {
  std::vector<float> out, state;
};

// Tokens [0, n) of one sequence through MambaConv: as one segment beside a
// second sequence's one-token segment, or one token a call.
ConvRun Conv(Backend& be, int e, int k, bool bias, int n, bool one_by_one) {
  std::mt19937 gen(7 + e + k);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> w(e * k), b(e), x((n + 1) * e), state(2 * e * (k - 1));
  for (auto* v : {&w, &b, &x, &state}) {
    for (float& f : *v) f = u(gen);
  }
  ConvRun run{std::vector<float>((n + 1) * e, 0.0f), state};
  MambaConvParams p;
  p.x = x.data();
  p.ldx = e;
  p.w = w.data();
  p.bias = bias ? b.data() : nullptr;
  p.e = e;
  p.k = k;
  p.state = run.state.data();
  p.state_stride = e * (k - 1);
  p.out = run.out.data();
  std::vector<Segment> segs;
  if (one_by_one) {
    for (int t = 0; t < n; ++t) {
      segs = {{0, t, 1}};
      p.segs = segs.data();
      p.nsegs = 1;
      be.MambaConv(p);
    }
  } else {
    segs = {{0, 0, n}};
    p.segs = segs.data();
    p.nsegs = 1;
    be.MambaConv(p);
  }
  // The other slot's token, alone: the same call shape either way.
  segs = {{1, n, 1}};
  p.segs = segs.data();
  p.nsegs = 1;
  be.MambaConv(p);
  return run;
}

TEST(MambaOpsTest, ConvGivesATokenTheSameBitsOnEveryPath) {
  std::vector<std::unique_ptr<Backend>> backends;
  for (const char* isa : {"avx2", "avx512"}) {
    CpuBackendOptions o;
    o.threads = 1;
    o.isa = isa;
    auto be = MakeCpuBackend(o);
    // A processor without AVX-512 runs the AVX2 path only.
    if (!be.ok() && std::string(isa) == "avx512") continue;
    ASSERT_TRUE(be.ok()) << be.status();
    backends.push_back(*std::move(be));
  }
  for (const int e : {160, 69}) {
    for (const int k : {4, 3}) {
      for (const bool bias : {false, true}) {
        SCOPED_TRACE(testing::Message()
                     << "e " << e << " k " << k << " bias " << bias);
        const ConvRun want = Conv(*backends[0], e, k, bias, 5, true);
        for (const auto& be : backends) {
          for (const bool one_by_one : {true, false}) {
            const ConvRun got = Conv(*be, e, k, bias, 5, one_by_one);
            EXPECT_EQ(std::memcmp(got.out.data(), want.out.data(),
                                  want.out.size() * sizeof(float)),
                      0)
                << be->name() << " one by one " << one_by_one;
            EXPECT_EQ(std::memcmp(got.state.data(), want.state.data(),
                                  want.state.size() * sizeof(float)),
                      0)
                << be->name() << " one by one " << one_by_one;
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace seqboat
