// Whether this build runs under a sanitizer (--config=asan, --config=tsan,
// --config=fuzz), for tests whose assertions are about timing or the
// allocator, which sanitizers change: they slow a thread several times over
// and replace malloc with an allocator of their own.
#ifndef SEQBOAT_BASE_SANITIZERS_H_
#define SEQBOAT_BASE_SANITIZERS_H_

namespace seqboat {

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool kSanitizerBuild = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || \
    __has_feature(memory_sanitizer)
inline constexpr bool kSanitizerBuild = true;
#else
inline constexpr bool kSanitizerBuild = false;
#endif
#else
inline constexpr bool kSanitizerBuild = false;
#endif

}  // namespace seqboat

#endif  // SEQBOAT_BASE_SANITIZERS_H_
