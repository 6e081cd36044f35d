#include "engine/model/step_split.h"

#include <algorithm>

#include "engine/backend/decode_buckets.h"

namespace seqboat {

bool PlanStepSplit(const StepRows& rows, const std::vector<int>& buckets,
                   int min_decode_rows, StepSplit& split) {
  if (buckets.empty()) return false;
  int ones = 0, next = 0, max_slot = 0;
  for (const Segment& s : rows.segs) {
    if (s.start != next || s.len < 0 || s.slot < 0) return false;
    next += s.len;
    ones += s.len == 1;
    max_slot = std::max(max_slot, s.slot);
  }
  if (next != rows.n() || ones < std::max(1, min_decode_rows)) return false;
  const int bucket = PickDecodeBucket(buckets, ones);
  if (bucket == 0) return false;
  std::vector<uint8_t>& taken = split.slot_taken;
  taken.assign(static_cast<size_t>(max_slot) + 1, 0);
  for (const Segment& s : rows.segs) {
    if (s.len == 1) taken[s.slot] = 1;
  }
  for (const Segment& s : rows.segs) {
    if (s.len > 1 && taken[s.slot]) return false;
  }

  StepRows& decode = split.decode;
  StepRows& rest = split.rest;
  decode.clear();
  rest.clear();
  split.bucket = bucket;
  split.order.resize(rows.n());
  for (const Segment& s : rows.segs) {
    StepRows& pass = s.len == 1 ? decode : rest;
    const int32_t offset = s.len == 1 ? 0 : bucket;
    pass.segs.push_back({s.slot, pass.n(), s.len});
    for (int32_t r = s.start; r < s.start + s.len; ++r) {
      split.order[r] = offset + pass.n();
      pass.ids.push_back(rows.ids[r]);
    }
  }
  for (size_t k = 0; k < rows.fed_rows.size(); ++k) {
    const int32_t at = split.order[rows.fed_rows[k]];
    StepRows& pass = at < bucket ? decode : rest;
    pass.fed_rows.push_back(at < bucket ? at : at - bucket);
    pass.fed_from.push_back(rows.fed_from[k]);
  }
  // Padded rows are zero-length segments on slot 0: every recurrent op
  // skips them, so they read and write no state.
  for (int i = ones; i < bucket; ++i) {
    decode.ids.push_back(0);
    decode.segs.push_back({0, i, 0});
  }
  return true;
}

}  // namespace seqboat
