// RoPE frequencies of the `attention` block (HF half-split layout, MODELS.md
// §3.2) and the `rope_scaling` variants of Llama-family checkpoints (§10):
// the inverse frequencies and yarn's attention scale, and the cos/sin table
// the backends read. Everything here runs once, on the host, at load.
//
// Each variant follows transformers 4.48.3's ROPE_INIT_FUNCTIONS operation by
// operation in fp32 (its torch tensors are fp32 and its Python scalars enter
// fp32 arithmetic rounded to float), because the llama3 and yarn blends are
// not bit-reproducible in any other order.
//
// The cache rotates queries and keys at cache positions, never beyond
// sinks + window (attention_math.h), so the table has a fixed size whatever
// the stream's length; that is also why dynamic NTK reduces to plain RoPE here
// (see RopeScalingType::kDynamic).
//
// Partial rotary (rotary_dim < head_dim, e.g. Bamba, GPT-NeoX): the checkpoint
// rotates channels [0, rotary_dim) of each head with the half-split pairing
// (j, j + rotary_dim/2) and frequencies over rotary_dim, and passes the rest.
// The backends' RoPE always pairs (i, i + head_dim/2) and reads one table row
// of head_dim/2 entries, so the layer stores q and k with their channels
// reordered by RopeSourceChannel (a shared reordering of both leaves every
// q·k unchanged) and the table holds cos 1, sin 0 for the pairs that pass.
#ifndef SEQBOAT_ENGINE_LAYERS_ROPE_H_
#define SEQBOAT_ENGINE_LAYERS_ROPE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace seqboat {

enum class RopeScalingType {
  kNone,
  // inv_freq / factor (position interpolation).
  kLinear,
  // Dynamic NTK: θ grows once a forward pass spans more than
  // max_position_embeddings positions. Cache positions stay below that bound
  // (the config parse requires sinks + window + 1 <= max_position_embeddings),
  // so the frequencies are plain RoPE's, as transformers' are for any
  // sequence within max_position_embeddings.
  kDynamic,
  // Llama 3.1 / 3.2: per-pair blend by wavelength against the pre-training
  // context.
  kLlama3,
  // YaRN: per-pair ramp between interpolated and original frequencies, and
  // cos/sin multiplied by attention_factor.
  kYarn,
};

// config.json's "type" of a rope_scaling object, "?" for none.
const char* RopeScalingTypeName(RopeScalingType type);

// A canonical attention block's "rope_scaling" (config.json, pos
// "rope_half" only; null is plain RoPE):
//
//   {"type": "linear",  "factor": 4.0}
//   {"type": "dynamic", "factor": 2.0, "max_position_embeddings": 4096}
//   {"type": "llama3",  "factor": 8.0, "low_freq_factor": 1.0,
//    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
//   {"type": "yarn",    "factor": 4.0, "original_max_position_embeddings":
//   32768,
//    "beta_fast": 32.0, "beta_slow": 1.0, "attention_factor": 1.1386}
//
// Field rules: every field of the type is required and no other is allowed
// (a field the engine ignored would silently change the model); factor >= 1.
// Converters resolve the checkpoint's defaults before writing (yarn's
// attention_factor 0.1·ln(factor) + 1, beta_fast 32, beta_slow 1;
// transformers' "type"/"rope_type" spellings), so the object states the
// math completely. dynamic additionally requires sinks + window + 1 <=
// max_position_embeddings.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kNone;
  double factor = 1.0;  // >= 1, every type
  // kLlama3: 0 < low_freq_factor < high_freq_factor.
  double low_freq_factor = 0.0;
  double high_freq_factor = 0.0;
  // kLlama3, kYarn: the context the frequencies were trained for. (kYarn:
  // transformers 4.48.3 reads the HF config's max_position_embeddings here.)
  int64_t original_max_position_embeddings = 0;
  // kYarn: 0 < beta_slow <= beta_fast; attention_factor > 0 multiplies cos
  // and sin, so attention logits scale by its square.
  double beta_fast = 0.0;
  double beta_slow = 0.0;
  double attention_factor = 1.0;
  // kDynamic: the length past which transformers would rescale θ.
  int64_t max_position_embeddings = 0;
};

// InvalidArgument naming the field of a RopeScaling that cannot be computed
// (for layers built without a parsed config); rope_theta must exceed 1 for
// yarn, whose correction range divides by ln θ.
absl::Status CheckRopeScaling(const RopeScaling& s, double rope_theta);

// inv_freq_i for i in [0, rotary_dim / 2), fp32: the frequencies over the
// rotated channels (rotary_dim = head_dim for full RoPE), as transformers
// computes them from int(head_dim * partial_rotary_factor).
std::vector<float> RopeInvFreqs(const RopeScaling& s, int rotary_dim,
                                double rope_theta);

// What cos and sin are multiplied by: yarn's attention_factor, 1 otherwise.
float RopeAttentionScaling(const RopeScaling& s);

// cos and sin of p·inv_freq_i (fp32 angle, as transformers forms it), times
// RopeAttentionScaling, for positions p in [0, positions): [positions,
// head_dim / 2] each, row-major. Pairs i >= rotary_dim / 2 pass unrotated
// (cos 1, sin 0, unscaled: transformers scales only the rotated channels).
// rotary_dim: even, in [2, head_dim].
struct RopeTable {
  std::vector<float> cos;
  std::vector<float> sin;
};
RopeTable MakeRopeTable(const RopeScaling& s, int head_dim, int rotary_dim,
                        double rope_theta, int64_t positions);

// The checkpoint's channel (half-split pairs within [0, rotary_dim), the
// rest passed) that the backends' channel e of a head holds, so that their
// pair (i, i + head_dim/2) for i < rotary_dim/2 is the checkpoint's pair
// (i, i + rotary_dim/2); the passed channels fill the remaining pairs in
// order. The identity when rotary_dim = head_dim. head_dim and rotary_dim
// even, 0 <= e < head_dim.
int RopeSourceChannel(int e, int head_dim, int rotary_dim);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_ROPE_H_
