// Which vector instructions the CPU backend's kernels use, chosen once when
// the backend is made. The build targets x86-64-v3 (AVX2 + FMA + F16C) so that
// one binary runs on every machine; wider paths are compiled in their own
// units under a target pragma and only called when the processor (and the
// OS, which must save their registers) has them.
#ifndef SEQBOAT_KERNELS_CPU_CPU_ISA_H_
#define SEQBOAT_KERNELS_CPU_CPU_ISA_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace seqboat::cpu {

enum class Isa { kAvx2, kAvx512 };

const char* IsaName(Isa isa);

// What cpuid (and XCR0) report. Only some of it selects a kernel path; the
// rest is logged so that a figure can be read against its machine.
struct CpuFeatures {
  std::string brand;
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false, avx512_fp16 = false;
  bool amx_tile = false, amx_bf16 = false, amx_int8 = false;

  // "AMD EPYC 9R14: avx2 fma f16c avx512f ... (path avx512)"
  std::string Describe() const;
  bool Has(Isa isa) const;
  // The widest path this processor runs.
  Isa Best() const;
};

CpuFeatures DetectCpu();

// "auto" (the widest available), "avx2" or "avx512". A path the processor
// lacks is FailedPrecondition naming what is missing; an unknown name is
// InvalidArgument.
absl::StatusOr<Isa> ChooseIsa(absl::string_view want,
                              const CpuFeatures& features);

}  // namespace seqboat::cpu

#endif  // SEQBOAT_KERNELS_CPU_CPU_ISA_H_
