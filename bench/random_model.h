// Writes a canonical model directory of a given Mamba-1 shape with random
// weights at realistic scales, for benchmarks that need the real shape of a
// public model but not its numbers.
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

}  // namespace seqboat

#endif  // SEQBOAT_BENCH_RANDOM_MODEL_H_
