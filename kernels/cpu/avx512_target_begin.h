// Compiles the functions that follow, up to avx512_target_end.h, for the
// instruction sets CpuFeatures::Has(Isa::kAvx512) checks (cpu_isa.cc): the
// one place the AVX-512 units name them. Include it after every header those
// functions use, so that only the unit's own code takes the wider target.
// No include guard: a unit opens and closes the region once each.
#if defined(__clang__)
#pragma clang attribute push(                                      \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq"))), \
    apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq")
// GCC 12 flags _mm512_undefined_ps's deliberate self-initialisation inside
// its own conversion intrinsics once they are inlined into such functions.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
