// Mamba-1's recurrent ops alone (the conv and the selective scan of the 130M
// shape: d_inner 1536, d_state 16, d_conv 4, 24 layers), one decode step of
// every layer per batch size, against the machine's in-place update
// bandwidth measured in the same run: at large batches each step must read
// and write every sequence's state once, so that bandwidth bounds the ops.
//
//   bazel run -c opt //bench:mamba_ops_bench -- [--batches=1,32,128]
//   [--isa=auto|avx2|avx512] [--steps=20]
#include <omp.h>

#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "engine/backend/mamba_params.h"
#include "engine/cpu/cpu_backend.h"

ABSL_FLAG(std::string, batches, "1,32,128", "decode batch sizes");
ABSL_FLAG(std::string, isa, "auto", "CPU instruction set: auto, avx2, avx512");
ABSL_FLAG(int, steps, 20, "timed steps per batch size");
ABSL_FLAG(int, layers, 24, "Mamba layers (each has its own state)");

namespace seqboat {
namespace {

using bench::Clock;
using bench::Median;
using bench::Seconds;

constexpr int kE = 1536, kN = 16, kK = 4;

struct LayerData {
  std::vector<float> state;  // [slot][conv (e * (k-1)) | ssm (e * n)]
  std::vector<float> conv_w, a, d, dt_bias;
};

int Run() {
  std::vector<int> batches;
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_batches), ',')) {
    int b;
    if (absl::SimpleAtoi(p, &b) && b > 0) batches.push_back(b);
  }
  if (batches.empty()) return 1;
  CpuBackendOptions opt;
  opt.isa = absl::GetFlag(FLAGS_isa);
  auto made = MakeCpuBackend(opt);
  if (!made.ok()) {
    std::fprintf(stderr, "%s\n", made.status().ToString().c_str());
    return 1;
  }
  std::unique_ptr<Backend> be = *std::move(made);
  const double update_bw = bench::MeasureUpdateBandwidth();
  std::printf("%s, threads %d, in-place update bandwidth %.1f GB/s\n",
              be->DeviceName().c_str(), omp_get_max_threads(), update_bw);
  const int layers = absl::GetFlag(FLAGS_layers);
  const int64_t conv_floats = int64_t{kE} * (kK - 1);
  const int64_t stride = conv_floats + int64_t{kE} * kN;
  std::printf("%6s %10s %10s %10s %12s %10s\n", "batch", "conv ms", "scan ms",
              "state MB", "state GB/s", "of bound");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  for (int b : batches) {
    std::vector<LayerData> ls(layers);
    for (LayerData& l : ls) {
      l.state.assign(static_cast<size_t>(b) * stride, 0.0f);
      for (float& v : l.state) v = 0.1f * u(rng);
      l.conv_w.resize(kE * kK);
      for (float& v : l.conv_w) v = 0.5f * u(rng);
      l.a.resize(kE * kN);
      for (int c = 0; c < kE; ++c) {
        for (int i = 0; i < kN; ++i) l.a[c * kN + i] = -(i + 1.0f);
      }
      l.d.assign(kE, 1.0f);
      l.dt_bias.assign(kE, -4.0f);
    }
    // The step's inputs, shared by the layers: [b, 2e] (x | z), conv
    // outputs [b, e], dt [b, e], B and C [b, 2n], outputs [b, e].
    std::vector<float> xz(static_cast<size_t>(b) * 2 * kE), x(b * kE),
        dt(b * kE), bc(b * 2 * kN), y(b * kE);
    for (std::vector<float>* v : {&xz, &dt, &bc})
      for (float& f : *v) f = u(rng);
    std::vector<Segment> segs(b);
    for (int i = 0; i < b; ++i) segs[i] = {i, i, 1};
    std::vector<double> conv_t, scan_t;
    for (int s = 0; s < absl::GetFlag(FLAGS_steps) + 2; ++s) {
      double conv_s = 0, scan_s = 0;
      for (LayerData& l : ls) {
        MambaConvParams conv;
        conv.segs = segs.data();
        conv.nsegs = b;
        conv.x = xz.data();
        conv.ldx = 2 * kE;
        conv.state = l.state.data();
        conv.state_stride = stride;
        conv.w = l.conv_w.data();
        conv.e = kE;
        conv.k = kK;
        conv.out = x.data();
        auto t0 = Clock::now();
        be->MambaConv(conv);
        conv_s += Seconds(t0, Clock::now());
        MambaScanParams scan;
        scan.segs = segs.data();
        scan.nsegs = b;
        scan.x = x.data();
        scan.dt = dt.data();
        scan.bc = bc.data();
        scan.ldbc = 2 * kN;
        scan.z = xz.data() + kE;
        scan.ldz = 2 * kE;
        scan.a = l.a.data();
        scan.d = l.d.data();
        scan.dt_bias = l.dt_bias.data();
        scan.state = l.state.data() + conv_floats;
        scan.state_stride = stride;
        scan.e = kE;
        scan.n_state = kN;
        scan.out = y.data();
        t0 = Clock::now();
        be->MambaScan(scan);
        scan_s += Seconds(t0, Clock::now());
      }
      if (s >= 2) {
        conv_t.push_back(conv_s);
        scan_t.push_back(scan_s);
      }
    }
    const double conv_s = Median(conv_t), scan_s = Median(scan_t);
    const double bytes = 4.0 * stride * b * layers;
    const double gbs = 2.0 * bytes / (conv_s + scan_s) / 1e9;
    std::printf("%6d %10.2f %10.2f %10.1f %12.1f %9.0f%%\n", b, conv_s * 1e3,
                scan_s * 1e3, bytes / 1e6, gbs, 100 * gbs / update_bw);
  }
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run();
}
