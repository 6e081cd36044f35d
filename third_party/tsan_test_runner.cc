// The --run_under wrapper of --config=tsan (.bazelrc): points TSAN_OPTIONS at
// the committed suppressions file, then runs the test in its place. Bazel
// does not expand a path to the checkout inside --test_env, so the file
// travels as this wrapper's runfile.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s TEST [ARG...]\n", argv[0]);
    return 2;
  }
  // Bazel stages the wrapper inside the test's runfiles, its data beside
  // it; run on its own, the data is in its own runfiles.
  const std::string self = argv[0];
  const std::string dir = self.substr(0, self.rfind('/') + 1);
  std::string suppressions = dir + "tsan_suppressions.txt";
  if (access(suppressions.c_str(), R_OK) != 0) {
    suppressions = self + ".runfiles/seqboat/third_party/tsan_suppressions.txt";
  }
  if (access(suppressions.c_str(), R_OK) != 0) {
    std::fprintf(stderr, "%s: no tsan_suppressions.txt beside it\n", argv[0]);
    return 2;
  }
  std::string options = "suppressions=" + suppressions;
  if (const char* given = std::getenv("TSAN_OPTIONS")) {
    options = std::string(given) + ":" + options;
  }
  setenv("TSAN_OPTIONS", options.c_str(), /*overwrite=*/1);
  execv(argv[1], argv + 1);
  std::perror(argv[1]);
  return 127;
}
