#include "kernels/cpu/cpu_isa.h"

#include <cpuid.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace seqboat::cpu {
namespace {

bool Bit(uint32_t reg, int bit) { return (reg >> bit) & 1u; }

uint64_t Xcr0() {
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t{hi} << 32) | lo;
}

std::string Brand() {
  uint32_t regs[12] = {};
  uint32_t max_ext = __get_cpuid_max(0x80000000u, nullptr);
  if (max_ext < 0x80000004u) return "unknown processor";
  for (uint32_t i = 0; i < 3; ++i) {
    __get_cpuid(0x80000002u + i, &regs[4 * i], &regs[4 * i + 1],
                &regs[4 * i + 2], &regs[4 * i + 3]);
  }
  char text[49] = {};
  std::memcpy(text, regs, 48);
  return std::string(absl::StripAsciiWhitespace(text));
}

}  // namespace

const char* IsaName(Isa isa) { return isa == Isa::kAvx512 ? "avx512" : "avx2"; }

CpuFeatures DetectCpu() {
  CpuFeatures f;
  f.brand = Brand();
  uint32_t a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = Bit(c, 27);
  const uint64_t xcr0 = osxsave ? Xcr0() : 0;
  // The OS saves ymm (bits 1-2), zmm and mask registers (5-7), AMX tiles
  // (17-18); without that the instructions fault however cpuid reads.
  const bool os_ymm = (xcr0 & 0x6) == 0x6;
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;
  const bool os_amx = (xcr0 & 0x60000) == 0x60000;
  f.fma = os_ymm && Bit(c, 12);
  f.f16c = os_ymm && Bit(c, 29);
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  f.avx2 = os_ymm && Bit(b, 5);
  f.avx512f = os_zmm && Bit(b, 16);
  f.avx512dq = os_zmm && Bit(b, 17);
  f.avx512bw = os_zmm && Bit(b, 30);
  f.avx512vl = os_zmm && Bit(b, 31);
  f.avx512_vnni = os_zmm && Bit(c, 11);
  f.avx512_fp16 = os_zmm && Bit(d, 23);
  f.amx_bf16 = os_amx && Bit(d, 22);
  f.amx_tile = os_amx && Bit(d, 24);
  f.amx_int8 = os_amx && Bit(d, 25);
  uint32_t a1 = 0, b1 = 0, c1 = 0, d1 = 0;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f.avx512_bf16 = os_zmm && Bit(a1, 5);
  return f;
}

bool CpuFeatures::Has(Isa isa) const {
  switch (isa) {
    case Isa::kAvx2:
      return avx2 && fma && f16c;
    case Isa::kAvx512:
      return Has(Isa::kAvx2) && avx512f && avx512bw && avx512vl && avx512dq;
  }
  return false;
}

Isa CpuFeatures::Best() const {
  return Has(Isa::kAvx512) ? Isa::kAvx512 : Isa::kAvx2;
}

std::string CpuFeatures::Describe() const {
  std::vector<std::string> on;
  const std::pair<bool, const char*> all[] = {
      {avx2, "avx2"},
      {fma, "fma"},
      {f16c, "f16c"},
      {avx512f, "avx512f"},
      {avx512bw, "avx512bw"},
      {avx512vl, "avx512vl"},
      {avx512dq, "avx512dq"},
      {avx512_bf16, "avx512_bf16"},
      {avx512_vnni, "avx512_vnni"},
      {avx512_fp16, "avx512_fp16"},
      {amx_tile, "amx_tile"},
      {amx_bf16, "amx_bf16"},
      {amx_int8, "amx_int8"},
  };
  for (const auto& [has, name] : all) {
    if (has) on.push_back(name);
  }
  return absl::StrCat(
      brand, ": ",
      on.empty() ? "no vector extensions" : absl::StrJoin(on, " "));
}

absl::StatusOr<Isa> ChooseIsa(absl::string_view want,
                              const CpuFeatures& features) {
  Isa isa;
  if (want == "auto" || want.empty()) {
    isa = features.Best();
  } else if (want == "avx2") {
    isa = Isa::kAvx2;
  } else if (want == "avx512") {
    isa = Isa::kAvx512;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "unknown CPU instruction set '", want, "' (auto, avx2 or avx512)"));
  }
  if (!features.Has(isa)) {
    return absl::FailedPreconditionError(
        absl::StrCat("this processor cannot run the ", IsaName(isa),
                     " kernels (", features.Describe(), ")"));
  }
  return isa;
}

}  // namespace seqboat::cpu
