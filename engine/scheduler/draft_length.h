// How many tokens a speculating sequence drafts next, following how many of
// its recent drafts were taken: one more after a round that took its whole
// draft (up to the request's num_draft_tokens), and after a rejection no
// more than one past the tokens that round took and one fewer than it
// offered (never below one). A sequence whose drafts are rarely taken
// stops paying for the rows of long rounds; one whose drafts are taken
// whole is back at full length after a few rounds. Output never depends on
// it: every token is still the model's own draw.
#ifndef SEQBOAT_ENGINE_SCHEDULER_DRAFT_LENGTH_H_
#define SEQBOAT_ENGINE_SCHEDULER_DRAFT_LENGTH_H_

#include <cstdint>

namespace seqboat {

class DraftLength {
 public:
  // Starts at `most`; without `adaptive` it stays there.
  DraftLength(int32_t most, bool adaptive)
      : most_(most), adaptive_(adaptive), next_(most) {}

  // The most tokens the next draft may hold.
  int32_t next() const { return next_; }
  // A round offered `drafted` tokens and took `accepted` of them.
  void Update(int32_t drafted, int32_t accepted);

 private:
  int32_t most_;
  bool adaptive_;
  int32_t next_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SCHEDULER_DRAFT_LENGTH_H_
