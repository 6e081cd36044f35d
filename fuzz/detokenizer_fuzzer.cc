// A generated token stream through the incremental detokenizer and the stop
// checker, composed as engine/scheduler/sequence.cc composes them, with each
// tokenizer embedded from the tokenizer_json corpus. Input: a byte that picks
// the tokenizer (low 7 bits) and whether the stream starts the text (high bit),
// a count of stop strings (mod 5), each stop string as a length byte (mod 17)
// and its bytes (made valid UTF-8, as the server's validation leaves them),
// then two bytes per token id, covering the vocabulary and a few ids past it
// (a model may have more rows than its tokenizer has tokens).
//
// Against a one-shot reference on the whole text: every piece is valid
// UTF-8; after each token exactly the text that cannot be part of a stop
// string has come out; the stream stops at the stop string that ends first
// (ties: the longest), having emitted exactly the text before it; otherwise
// it emits the whole text.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/stop_checker.h"
#include "engine/tokenizer/utf8.h"
#include "fuzz/embedded_tokenizers.h"
#include "fuzz/fuzz_check.h"
#include "fuzz/tokenizer_checks.h"

namespace {

class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return size_ == 0; }
  uint8_t Byte() {
    if (size_ == 0) return 0;
    --size_;
    return *data_++;
  }
  std::string Bytes(size_t n) {
    n = std::min(n, size_);
    std::string out(reinterpret_cast<const char*>(data_), n);
    data_ += n;
    size_ -= n;
    return out;
  }

 private:
  const uint8_t* data_;
  size_t size_;
};

struct Match {
  size_t start;
  std::string stop;
};

// The first stop string to end in `text` (ties: the one starting first).
std::optional<Match> FirstMatch(std::string_view text,
                                const std::vector<std::string>& stops) {
  std::optional<Match> best;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;
    const size_t pos = text.find(stop);
    if (pos == std::string_view::npos) continue;
    const size_t end = pos + stop.size();
    if (!best || end < best->start + best->stop.size() ||
        (end == best->start + best->stop.size() && pos < best->start)) {
      best = Match{pos, stop};
    }
  }
  return best;
}

// How much of the end of `text` is a proper prefix of a stop string.
size_t HeldBack(std::string_view text, const std::vector<std::string>& stops) {
  size_t held = 0;
  for (const std::string& stop : stops) {
    if (stop.empty()) continue;  // StopChecker ignores empty stop strings
    for (size_t k = std::min(text.size(), stop.size() - 1); k > held; --k) {
      if (text.substr(text.size() - k) == std::string_view(stop).substr(0, k)) {
        held = k;
        break;
      }
    }
  }
  return held;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto* const tokenizers =
      new std::vector<std::unique_ptr<seqboat::Tokenizer>>(
          seqboat::fuzz::LoadEmbeddedTokenizers({}));
  Input input(data, size);
  const uint8_t head = input.Byte();
  const seqboat::Tokenizer& tokenizer =
      *(*tokenizers)[(head & 0x7f) % seqboat::fuzz::kNumEmbeddedTokenizers];
  const bool at_text_start = (head & 0x80) != 0;
  std::vector<std::string> stops(input.Byte() % 5);
  for (std::string& stop : stops) {
    stop = seqboat::Utf8Lossy(input.Bytes(input.Byte() % 17));
  }
  std::vector<int32_t> ids;
  while (!input.empty()) {
    const int low = input.Byte();
    const int v = low | input.Byte() << 8;
    ids.push_back(v % (tokenizer.vocab_size() + 4));
  }

  // The whole text, at once.
  const std::string text =
      seqboat::fuzz::CheckedDetokenize(tokenizer, ids, at_text_start);
  const std::optional<Match> match = FirstMatch(text, stops);

  // The same, token by token, as a Sequence emits it.
  seqboat::IncrementalDetokenizer detokenizer(tokenizer, at_text_start);
  seqboat::StopChecker checker(stops);
  std::string fed;      // what the detokenizer gave the stop checker
  std::string emitted;  // what the stop checker let out
  std::optional<std::string> matched;
  auto push = [&](const std::string& piece) {
    fed += piece;
    const std::string out = checker.Push(piece, &matched);
    FUZZ_CHECK(seqboat::fuzz::IsValidUtf8(out));
    // Emitted text is always fed text (compared as it comes, to stay linear).
    FUZZ_CHECK(std::string_view(fed).substr(emitted.size(), out.size()) == out);
    emitted += out;
  };
  for (int32_t id : ids) {
    push(detokenizer.Push(id));
    if (matched.has_value()) break;
    FUZZ_CHECK(!checker.stopped());
    FUZZ_CHECK(emitted.size() == fed.size() - HeldBack(fed, stops));
  }
  if (!matched.has_value()) {
    push(detokenizer.Flush());
    if (!matched.has_value()) emitted += checker.Flush();
  }

  if (match.has_value()) {
    FUZZ_CHECK(checker.stopped());
    FUZZ_CHECK(matched == match->stop);
    FUZZ_CHECK(emitted == text.substr(0, match->start));
    // Text after a match is dropped.
    FUZZ_CHECK(checker.Push("more", &matched).empty() && !matched);
  } else {
    FUZZ_CHECK(!checker.stopped() && !matched);
    FUZZ_CHECK(emitted == text);
  }
  return 0;
}
