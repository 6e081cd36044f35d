#include "engine/backend/decode_buckets.h"

#include <algorithm>

namespace seqboat {

std::vector<int> DefaultDecodeBuckets(int max_slots) {
  std::vector<int> out;
  if (max_slots <= 0) return out;
  for (int b = 1; b < max_slots;) {
    out.push_back(b);
    b = b < 8 ? b * 2 : (b < 64 ? b + 8 : b + 32);
  }
  out.push_back(max_slots);
  return out;
}

int PickDecodeBucket(const std::vector<int>& buckets, int n) {
  auto it = std::lower_bound(buckets.begin(), buckets.end(), n);
  return it == buckets.end() ? 0 : *it;
}

}  // namespace seqboat
