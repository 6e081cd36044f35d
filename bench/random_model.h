// Writes a canonical model directory of a given Mamba-1 or Mamba-2 shape with
// random weights at realistic scales, for benchmarks that need the real shape
// of a public model but not its numbers.
#ifndef SEQBOAT_BENCH_RANDOM_MODEL_H_
#define SEQBOAT_BENCH_RANDOM_MODEL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"

namespace seqboat {

struct RandomMambaShape {
  int d_model = 768;
  int n_layers = 24;
  int d_state = 16;
  int expand = 2;
  int d_conv = 4;
  int vocab = 50280;
  uint64_t seed = 1;
};

// Creates dir (config.json, model.safetensors, byte tokenizer.json).
absl::Status WriteRandomMamba(const RandomMambaShape& shape,
                              const std::string& dir);

// A Mamba-2 stack; the defaults are state-spaces/mamba2-130m's shape (MODELS.md
// §7.9: E = 1536, 24 heads, vocab 50277 padded to 50288).
struct RandomMamba2Shape {
  int d_model = 768;
  int n_layers = 24;
  int head_dim = 64;
  int d_state = 128;
  int n_groups = 1;
  int expand = 2;
  int d_conv = 4;
  int vocab = 50288;
  uint64_t seed = 1;
};

absl::Status WriteRandomMamba2(const RandomMamba2Shape& shape,
                               const std::string& dir);

}  // namespace seqboat

#endif  // SEQBOAT_BENCH_RANDOM_MODEL_H_
