#include "engine/tokenizer/added_token_matcher.h"

#include <algorithm>
#include <utility>

#include "engine/tokenizer/unicode_chars.h"

namespace seqboat {

void AddedTokenMatcher::Add(std::string content, int32_t id, bool lstrip,
                            bool rstrip) {
  const int index = static_cast<int>(tokens_.size());
  std::vector<int>& bucket =
      by_first_byte_[static_cast<uint8_t>(content.front())];
  tokens_.push_back({std::move(content), id, lstrip, rstrip});
  bucket.push_back(index);
  // Stable: among equal contents the first added wins.
  std::stable_sort(bucket.begin(), bucket.end(), [this](int a, int b) {
    return tokens_[a].content.size() > tokens_[b].content.size();
  });
}

int AddedTokenMatcher::Match(std::string_view text, size_t pos) const {
  for (int index : by_first_byte_[static_cast<uint8_t>(text[pos])]) {
    const std::string& content = tokens_[index].content;
    if (text.compare(pos, content.size(), content) == 0) return index;
  }
  return -1;
}

void AddedTokenMatcher::Split(std::string_view text,
                              std::vector<Piece>* out) const {
  size_t emitted = 0;  // end of the last match, start of unclaimed text
  size_t pos = 0;
  while (pos < text.size()) {
    const int index = Match(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const Token& token = tokens_[index];
    size_t start = pos;
    size_t end = pos + token.content.size();
    char32_t cp;
    if (token.lstrip) {
      while (start > emitted) {
        const size_t len = PrevCharLength(text, start);
        NextChar(text, start - len, &cp);
        if (!IsUnicodeWhitespace(cp)) break;
        start -= len;
      }
    }
    if (token.rstrip) {
      while (end < text.size()) {
        const size_t len = NextChar(text, end, &cp);
        if (!IsUnicodeWhitespace(cp)) break;
        end += len;
      }
    }
    if (start > emitted) {
      out->push_back({text.substr(emitted, start - emitted), -1});
    }
    out->push_back({text.substr(start, end - start), token.id});
    emitted = pos = end;
  }
  if (emitted < text.size()) out->push_back({text.substr(emitted), -1});
}

void AddedTokenMatcher::SplitOutside(
    std::string_view text, const std::vector<std::pair<size_t, size_t>>& skip,
    std::vector<Piece>* out) const {
  size_t emitted = 0;  // start of the text not yet in `out`
  std::vector<Piece> pieces;
  // Matches within [begin, end); a token never spans a skipped range.
  const auto scan = [&](size_t begin, size_t end) {
    if (begin >= end) return;
    pieces.clear();
    Split(text.substr(begin, end - begin), &pieces);
    for (const Piece& piece : pieces) {
      if (piece.id < 0) continue;
      const size_t at = static_cast<size_t>(piece.text.data() - text.data());
      if (at > emitted)
        out->push_back({text.substr(emitted, at - emitted), -1});
      out->push_back(piece);
      emitted = at + piece.text.size();
    }
  };
  size_t region = 0;
  for (const auto& [begin, end] : skip) {
    scan(region, std::min(begin, text.size()));
    region = std::max(region, std::min(end, text.size()));
  }
  scan(region, text.size());
  if (emitted < text.size()) out->push_back({text.substr(emitted), -1});
}

}  // namespace seqboat
