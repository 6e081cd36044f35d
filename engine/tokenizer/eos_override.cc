#include "engine/tokenizer/eos_override.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

class EosOverride : public Tokenizer {
 public:
  EosOverride(std::unique_ptr<Tokenizer> inner, int32_t eos)
      : inner_(std::move(inner)), eos_(eos) {}
  std::vector<int32_t> Encode(std::string_view text) const override {
    return inner_->Encode(text);
  }
  std::vector<int32_t> EncodeChat(
      std::string_view text,
      const std::vector<TextRange>& literal) const override {
    return inner_->EncodeChat(text, literal);
  }
  std::string TokenBytes(int32_t id) const override {
    return inner_->TokenBytes(id);
  }
  std::string DecodeToken(int32_t id, bool at_text_start) const override {
    return inner_->DecodeToken(id, at_text_start);
  }
  int32_t vocab_size() const override { return inner_->vocab_size(); }
  int32_t eos_token_id() const override { return eos_; }
  bool IsSpecial(int32_t id) const override { return inner_->IsSpecial(id); }

 private:
  std::unique_ptr<Tokenizer> inner_;
  int32_t eos_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> WithEosOverride(
    std::unique_ptr<Tokenizer> inner, int32_t eos_token_id) {
  if (eos_token_id < 0 || eos_token_id >= inner->vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("eos_token_id override: ", eos_token_id,
                     " is outside [0, ", inner->vocab_size(), ")"));
  }
  return std::unique_ptr<Tokenizer>(
      new EosOverride(std::move(inner), eos_token_id));
}

}  // namespace seqboat
