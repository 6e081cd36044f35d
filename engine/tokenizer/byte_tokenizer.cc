#include "engine/tokenizer/byte_tokenizer.h"

#include <array>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

// Contents conventionally used for end-of-sequence by the model families we
// load; the first special added token carrying one of them becomes EOS.
constexpr std::array<std::string_view, 3> kEosContents = {"<|endoftext|>",
                                                          "</s>", "<eos>"};

bool IsEosContent(std::string_view content) {
  for (std::string_view eos : kEosContents) {
    if (content == eos) return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ByteTokenizer>> ByteTokenizer::Create(
    std::vector<AddedToken> added_tokens) {
  int32_t max_id = kNumByteTokens - 1;
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    const int32_t id = added_tokens[i].id;
    if (id < kNumByteTokens || id > kMaxTokenId) {
      return absl::InvalidArgumentError(absl::StrCat(
          "added_tokens[", i, "].id: ", id, " is outside [", kNumByteTokens,
          ", ", kMaxTokenId, "] (ids 0..255 are the bytes)"));
    }
    if (id > max_id) max_id = id;
  }

  auto tok = std::unique_ptr<ByteTokenizer>(new ByteTokenizer());
  tok->vocab_size_ = max_id + 1;
  tok->added_.resize(static_cast<size_t>(max_id + 1 - kNumByteTokens));
  for (size_t i = 0; i < added_tokens.size(); ++i) {
    AddedToken& added = added_tokens[i];
    Entry& entry = tok->added_[static_cast<size_t>(added.id - kNumByteTokens)];
    if (entry.defined) {
      return absl::InvalidArgumentError(absl::StrCat(
          "added_tokens[", i, "].id: ", added.id, " appears more than once"));
    }
    entry.defined = true;
    entry.special = added.special;
    entry.content = std::move(added.content);
    if (entry.special && !entry.content.empty()) {
      tok->special_matcher_.Add(entry.content, added.id, added.lstrip,
                                added.rstrip);
    }
    if (tok->eos_token_id_ < 0 && entry.special &&
        IsEosContent(entry.content)) {
      tok->eos_token_id_ = added.id;
    }
  }
  return tok;
}

std::vector<int32_t> ByteTokenizer::Encode(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::vector<int32_t> ByteTokenizer::EncodeChat(
    std::string_view text, const std::vector<TextRange>& literal) const {
  std::vector<std::pair<size_t, size_t>> skip;
  for (const TextRange& r : literal) skip.emplace_back(r.begin, r.end);
  std::vector<AddedTokenMatcher::Piece> pieces;
  special_matcher_.SplitOutside(text, skip, &pieces);
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (const AddedTokenMatcher::Piece& piece : pieces) {
    if (piece.id >= 0) {
      ids.push_back(piece.id);
    } else {
      for (char c : piece.text) ids.push_back(static_cast<unsigned char>(c));
    }
  }
  return ids;
}

std::string ByteTokenizer::TokenBytes(int32_t id) const {
  if (id >= 0 && id < kNumByteTokens) {
    return std::string(1, static_cast<char>(static_cast<unsigned char>(id)));
  }
  if (id >= kNumByteTokens && id < vocab_size_) {
    return added_[static_cast<size_t>(id - kNumByteTokens)].content;
  }
  return "";
}

bool ByteTokenizer::IsSpecial(int32_t id) const {
  if (id < kNumByteTokens || id >= vocab_size_) return false;
  return added_[static_cast<size_t>(id - kNumByteTokens)].special;
}

}  // namespace seqboat
