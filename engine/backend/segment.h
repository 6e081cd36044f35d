// A run of consecutive tokens of one sequence inside a step's packed batch:
// rows [start, start + len) of every activation, state in arena slot `slot`.
// Decode is len == 1; a prefill chunk is len > 1; len == 0 pads a decode
// bucket and touches no state. Plain data: host code and CUDA kernels read
// the same arrays.
#ifndef SEQBOAT_ENGINE_BACKEND_SEGMENT_H_
#define SEQBOAT_ENGINE_BACKEND_SEGMENT_H_

#include <stdint.h>

namespace seqboat {

struct Segment {
  int32_t slot = 0;
  int32_t start = 0;
  int32_t len = 0;
};

// Whether no segment of a call carries more than one token (decode rows and
// padding only): the CUDA backend then takes its decode kernels, which spread
// one token's work over more threads. `segs` is host memory.
inline bool AllDecodeRows(const Segment* segs, int nsegs) {
  for (int i = 0; i < nsegs; ++i) {
    if (segs[i].len > 1) return false;
  }
  return true;
}

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_SEGMENT_H_
