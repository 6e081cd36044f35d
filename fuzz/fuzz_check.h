// FUZZ_CHECK: an invariant of the code under test. A violation prints what
// failed and aborts, which both libFuzzer and the corpus replay report as a
// crash with the input that caused it.
#ifndef SEQBOAT_FUZZ_FUZZ_CHECK_H_
#define SEQBOAT_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition, ...)                                    \
  do {                                                                \
    if (!(condition)) {                                               \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK(%s) failed.", __FILE__, \
                   __LINE__, #condition);                             \
      std::fprintf(stderr, " " __VA_ARGS__);                          \
      std::fputc('\n', stderr);                                       \
      std::abort();                                                   \
    }                                                                 \
  } while (0)

#endif  // SEQBOAT_FUZZ_FUZZ_CHECK_H_
