#include "engine/tokenizer/incremental_detokenizer.h"

#include "engine/tokenizer/utf8.h"

namespace seqboat {

std::string IncrementalDetokenizer::Push(int32_t id) {
  if (tokenizer_.IsSpecial(id)) return "";
  pending_ += tokenizer_.DecodeToken(id, at_text_start_);
  at_text_start_ = false;
  std::string out;
  const size_t used = DecodeUtf8Lossy(pending_, /*final=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDetokenizer::Flush() {
  std::string out;
  DecodeUtf8Lossy(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace seqboat
