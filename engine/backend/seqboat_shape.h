// Plain descriptors of a SeqBoat block (MODELS.md §2) that the backend ops
// take: sizes, the GAU's attention options and the per-segment ranges of
// active tokens. No behaviour here; the math is in seqboat_math.h.
#ifndef SEQBOAT_ENGINE_BACKEND_SEQBOAT_SHAPE_H_
#define SEQBOAT_ENGINE_BACKEND_SEQBOAT_SHAPE_H_

#include <cstdint>

namespace seqboat {

enum class SeqBoatAttnFn : int32_t {
  kSoftmax = 0,  // softmax(q·k / sqrt(z) + bias)
  kRelu2 = 1,    // relu(q·k / w + bias)^2, no normalisation
};

enum class SeqBoatPos : int32_t {
  kRopeInterleaved = 0,  // RoPE on original positions, interleaved pairs
  kSimpleBias = 1,       // learned bias table indexed by the clamped offset
};

struct SeqBoatShape {
  int32_t d = 0;   // d_model
  int32_t ne = 0;  // EMA dimensions per channel
  int32_t z = 0;   // shared Q/K size
  int32_t v = 0;   // value / gate size
  int32_t w = 0;   // working memory: earlier active tokens a query sees
  SeqBoatAttnFn attn_fn = SeqBoatAttnFn::kSoftmax;
  SeqBoatPos pos = SeqBoatPos::kRopeInterleaved;
  double rope_theta = 10000.0;
  int32_t rel_pos_max = 0;  // M of the simple bias table [2M-1]
};

// The active tokens of one segment: rows [first, first + count) of the
// step's compacted (gathered) active-row arrays.
struct SeqBoatActiveRange {
  int32_t first = 0;
  int32_t count = 0;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_SEQBOAT_SHAPE_H_
