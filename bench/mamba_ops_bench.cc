// Mamba's recurrent ops alone, one decode step of every layer per batch size,
// against the machine's in-place update bandwidth measured in the same run:
// at large batches each step must read and write every sequence's state
// once, so that bandwidth bounds the ops. --kind=mamba1: the conv and the
// selective scan of the 130M shape (d_inner 1536, d_state 16, d_conv 4);
// --kind=mamba2: the conv over xBC and the SSD scan of the 130M Mamba-2 shape
// (24 heads of 64, d_state 128, one group). 24 layers each.
//
//   bazel run -c opt //bench:mamba_ops_bench -- [--kind=mamba1|mamba2]
//   [--batches=1,32,128] [--isa=auto|avx2|avx512] [--steps=20]
#include <omp.h>

#include <cmath>
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
#include "engine/backend/mamba2_params.h"
#include "engine/backend/mamba_params.h"
#include "kernels/cpu/cpu_backend.h"

ABSL_FLAG(std::string, batches, "1,32,128", "decode batch sizes");
ABSL_FLAG(std::string, isa, "auto", "CPU instruction set: auto, avx2, avx512");
ABSL_FLAG(int, steps, 20, "timed steps per batch size");
ABSL_FLAG(int, layers, 24, "Mamba layers (each has its own state)");
ABSL_FLAG(std::string, kind, "mamba1", "mamba1 or mamba2");

namespace seqboat {
namespace {

using bench::Clock;
using bench::Median;
using bench::Seconds;

constexpr int kE = 1536, kK = 4;
// Mamba-2's heads: kHeads * kHeadDim = kE, one B/C group.
constexpr int kHeads = 24, kHeadDim = 64, kN2 = 128;

struct Shape {
  bool mamba2;
  int n;        // d_state
  int conv_ch;  // conv channels: d_inner, or d_inner + 2 n for xBC
  int64_t ssm;  // SSM state floats per slot
};

struct LayerData {
  std::vector<float> state;  // [slot][conv (conv_ch * (k-1)) | ssm]
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
  const std::string kind = absl::GetFlag(FLAGS_kind);
  if (kind != "mamba1" && kind != "mamba2") {
    std::fprintf(stderr, "--kind must be mamba1 or mamba2, not %s\n",
                 kind.c_str());
    return 1;
  }
  Shape sh;
  sh.mamba2 = kind == "mamba2";
  sh.n = sh.mamba2 ? kN2 : 16;
  sh.conv_ch = sh.mamba2 ? kE + 2 * sh.n : kE;
  sh.ssm = int64_t{kE} * sh.n;
  const int64_t conv_floats = int64_t{sh.conv_ch} * (kK - 1);
  const int64_t stride = conv_floats + sh.ssm;
  std::printf("%s: %6s %10s %10s %10s %12s %10s\n", kind.c_str(), "batch",
              "conv ms", "scan ms", "state MB", "state GB/s", "of bound");
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const int a_len = sh.mamba2 ? kHeads : kE * sh.n;
  const int d_len = sh.mamba2 ? kHeads : kE;
  for (int b : batches) {
    std::vector<LayerData> ls(layers);
    for (LayerData& l : ls) {
      l.state.assign(static_cast<size_t>(b) * stride, 0.0f);
      for (float& v : l.state) v = 0.1f * u(rng);
      l.conv_w.resize(sh.conv_ch * kK);
      for (float& v : l.conv_w) v = 0.5f * u(rng);
      l.a.resize(a_len);
      for (int i = 0; i < a_len; ++i) l.a[i] = -(i % 16 + 1.0f);
      l.d.assign(d_len, 1.0f);
      l.dt_bias.assign(d_len, -4.0f);
    }
    // The step's inputs, shared by the layers. Mamba-1: in_proj rows
    // [b, 2e] (x | z), conv outputs [b, e], dt [b, e], B and C [b, 2n].
    // Mamba-2: in_proj rows [b, conv_ch] (xBC), conv outputs [b, conv_ch],
    // dt [b, heads]; its B and C are in xBC. Outputs [b, e].
    const int in_w = sh.mamba2 ? sh.conv_ch : 2 * kE;
    std::vector<float> in(static_cast<size_t>(b) * in_w),
        conv_out(static_cast<size_t>(b) * sh.conv_ch),
        dt(static_cast<size_t>(b) * d_len), bc(sh.mamba2 ? 0 : b * 2 * sh.n),
        y(b * kE);
    for (std::vector<float>* v : {&in, &dt, &bc})
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
        conv.x = in.data();
        conv.ldx = in_w;
        conv.state = l.state.data();
        conv.state_stride = stride;
        conv.w = l.conv_w.data();
        conv.e = sh.conv_ch;
        conv.k = kK;
        conv.out = conv_out.data();
        auto t0 = Clock::now();
        be->MambaConv(conv);
        conv_s += Seconds(t0, Clock::now());
        if (sh.mamba2) {
          Mamba2ScanParams scan;
          scan.segs = segs.data();
          scan.nsegs = b;
          scan.x = conv_out.data();
          scan.b = conv_out.data() + kE;
          scan.c = conv_out.data() + kE + sh.n;
          scan.ldxbc = sh.conv_ch;
          scan.dt = dt.data();
          scan.lddt = kHeads;
          scan.dt_bias = l.dt_bias.data();
          scan.a = l.a.data();
          scan.d = l.d.data();
          scan.dt_max = INFINITY;
          scan.state = l.state.data() + conv_floats;
          scan.state_stride = stride;
          scan.heads = kHeads;
          scan.head_dim = kHeadDim;
          scan.n_state = sh.n;
          scan.groups = 1;
          scan.out = y.data();
          scan.ldo = kE;
          t0 = Clock::now();
          be->Mamba2Scan(scan);
        } else {
          MambaScanParams scan;
          scan.segs = segs.data();
          scan.nsegs = b;
          scan.x = conv_out.data();
          scan.dt = dt.data();
          scan.bc = bc.data();
          scan.ldbc = 2 * sh.n;
          scan.z = in.data() + kE;
          scan.ldz = 2 * kE;
          scan.a = l.a.data();
          scan.d = l.d.data();
          scan.dt_bias = l.dt_bias.data();
          scan.state = l.state.data() + conv_floats;
          scan.state_stride = stride;
          scan.e = kE;
          scan.n_state = sh.n;
          scan.out = y.data();
          t0 = Clock::now();
          be->MambaScan(scan);
        }
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
    std::printf("%s: %6d %10.2f %10.2f %10.1f %12.1f %9.0f%%\n", kind.c_str(),
                b, conv_s * 1e3, scan_s * 1e3, bytes / 1e6, gbs,
                100 * gbs / update_bw);
  }
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run();
}
