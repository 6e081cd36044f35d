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

// A Qwen3.5 text stack (MODELS.md §12-13): every full_attention_interval-th
// layer gated full attention, the others Gated DeltaNet, each followed by a
// SwiGLU MLP; the defaults are Qwen3.5-0.8B's widths and vocabulary (18 GDN +
// 6 attention layers), the attention cache sinks + window keys.
struct RandomQwen35Shape {
  int d_model = 1024;
  int n_layers = 24;
  int full_attention_interval = 4;
  int n_k_heads = 16;
  int n_v_heads = 16;
  int head_k_dim = 128;
  int head_v_dim = 128;
  int n_heads = 8;
  int n_kv_heads = 2;
  int head_dim = 256;
  int rotary_dim = 64;
  int d_ff = 3584;
  int vocab = 248320;
  int sinks = 4;
  int window = 2044;
  uint64_t seed = 1;
};

absl::Status WriteRandomQwen35(const RandomQwen35Shape& shape,
                               const std::string& dir);

}  // namespace seqboat

#endif  // SEQBOAT_BENCH_RANDOM_MODEL_H_
