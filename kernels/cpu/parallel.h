// When an op is worth spreading over threads. Below a few tens of
// microseconds of work, waking a second thread costs more than it saves, and
// on a loaded machine (tests running side by side) a barrier waiting for a
// descheduled thread costs milliseconds: small models must stay serial.
#ifndef SEQBOAT_KERNELS_CPU_PARALLEL_H_
#define SEQBOAT_KERNELS_CPU_PARALLEL_H_

#include <cstdint>

#include "engine/backend/backend.h"

namespace seqboat::cpu {

// `work` in multiply-adds (or comparable inner-loop steps).
inline bool WorthThreads(int64_t work) { return work >= (int64_t{1} << 16); }

// Rows covered by a step's segments.
inline int64_t SegmentRows(const Segment* segs, int nsegs) {
  int64_t rows = 0;
  for (int s = 0; s < nsegs; ++s) rows += segs[s].len;
  return rows;
}

}  // namespace seqboat::cpu

#endif  // SEQBOAT_KERNELS_CPU_PARALLEL_H_
