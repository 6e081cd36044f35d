// Batch-size buckets for captured decode steps: a decode-only step of n rows
// runs padded to the smallest bucket >= n, so a handful of recordings (CUDA
// graphs) cover every batch size up to max_slots.
#ifndef SEQBOAT_ENGINE_BACKEND_DECODE_BUCKETS_H_
#define SEQBOAT_ENGINE_BACKEND_DECODE_BUCKETS_H_

#include <vector>

namespace seqboat {

// 1, 2, 4, 8, then multiples of 8 up to 64, then multiples of 32, capped at
// max_slots (always included): at most 7 padded rows up to 64 and 31 beyond,
// which cost little while decode GEMMs are bound by reading the weights, and
// a list short enough to record at start-up.
std::vector<int> DefaultDecodeBuckets(int max_slots);

// The smallest bucket >= n from an ascending list, or 0 when none holds n.
int PickDecodeBucket(const std::vector<int>& buckets, int n);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_DECODE_BUCKETS_H_
