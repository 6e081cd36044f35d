// Finds stop strings in streamed text. Text that could still become the
// start of a stop string is held back, so the client never sees any part of
// a stop string. Generation stops as soon as a stop string is complete: among
// matches the one ending first wins (ties: the longest), which makes the
// result independent of how the text was split into pushes. One instance per
// request; not thread-safe.
#ifndef SEQBOAT_ENGINE_TOKENIZER_STOP_CHECKER_H_
#define SEQBOAT_ENGINE_TOKENIZER_STOP_CHECKER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace seqboat {

class StopChecker {
 public:
  // Empty strings in `stops` are ignored (they would match before any text).
  explicit StopChecker(std::vector<std::string> stops);

  // Appends `text` and returns the text safe to emit now. On a match returns
  // the text before the stop string and sets *matched (if matched is
  // non-null) to it; otherwise sets *matched to nullopt. After a match,
  // further pushes return "" and the rest of the text is dropped. With
  // may_stop false (min_new_tokens not reached yet) a stop string ending in
  // this push is not a match but text like any other; one that began in it
  // and ends in a later push still matches there.
  std::string Push(std::string_view text, std::optional<std::string>* matched,
                   bool may_stop = true);
  // Returns the held-back text when generation ends for another reason.
  std::string Flush();

  bool stopped() const { return stopped_; }

 private:
  // Length of the longest suffix of pending_ that is a proper prefix of some
  // stop string.
  size_t HeldBackLength() const;

  std::vector<std::string> stops_;
  size_t max_stop_len_ = 0;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_TOKENIZER_STOP_CHECKER_H_
