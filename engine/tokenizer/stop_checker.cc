#include "engine/tokenizer/stop_checker.h"

#include <algorithm>
#include <utility>

namespace seqboat {

StopChecker::StopChecker(std::vector<std::string> stops) {
  for (std::string& stop : stops) {
    if (stop.empty()) continue;
    max_stop_len_ = std::max(max_stop_len_, stop.size());
    stops_.push_back(std::move(stop));
  }
}

std::string StopChecker::Push(std::string_view text,
                              std::optional<std::string>* matched,
                              bool may_stop) {
  if (matched != nullptr) matched->reset();
  if (stopped_) return "";
  const size_t old_size = pending_.size();
  pending_.append(text);

  // pending_ held no complete stop string before this push, so a match must
  // end inside the new text; start each search just early enough for that.
  // (What is held back is a proper prefix of a stop string, also after a
  // push that may not stop.)
  size_t best_end = std::string::npos;
  size_t best_start = 0;
  const std::string* best = nullptr;
  for (const std::string& stop : stops_) {
    if (!may_stop) break;
    const size_t from =
        old_size + 1 > stop.size() ? old_size + 1 - stop.size() : 0;
    const size_t pos = pending_.find(stop, from);
    if (pos == std::string::npos) continue;
    const size_t end = pos + stop.size();
    if (end < best_end || (end == best_end && pos < best_start)) {
      best_end = end;
      best_start = pos;
      best = &stop;
    }
  }
  if (best != nullptr) {
    stopped_ = true;
    if (matched != nullptr) *matched = *best;
    std::string out = pending_.substr(0, best_start);
    pending_.clear();
    return out;
  }

  const size_t emit = pending_.size() - HeldBackLength();
  std::string out = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return out;
}

std::string StopChecker::Flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

size_t StopChecker::HeldBackLength() const {
  if (max_stop_len_ == 0) return 0;
  const size_t longest = std::min(pending_.size(), max_stop_len_ - 1);
  for (size_t k = longest; k > 0; --k) {
    const std::string_view suffix =
        std::string_view(pending_).substr(pending_.size() - k);
    for (const std::string& stop : stops_) {
      if (stop.size() > k && std::string_view(stop).substr(0, k) == suffix) {
        return k;
      }
    }
  }
  return 0;
}

}  // namespace seqboat
