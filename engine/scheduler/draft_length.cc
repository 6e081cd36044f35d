#include "engine/scheduler/draft_length.h"

#include <algorithm>

namespace seqboat {

void DraftLength::Update(int32_t drafted, int32_t accepted) {
  if (!adaptive_ || drafted <= 0 || most_ <= 0) return;
  if (accepted >= drafted) {
    // A draft shorter than allowed (the drafter had no more, or the
    // request's end was near) says nothing about a longer one.
    if (drafted >= next_) next_ = std::min(most_, next_ + 1);
    return;
  }
  next_ = std::max(1, std::min(next_ - 1, accepted + 1));
}

}  // namespace seqboat
