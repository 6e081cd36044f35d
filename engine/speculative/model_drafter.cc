#include "engine/speculative/model_drafter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace seqboat {
namespace {

// Why the draft tokenizer cannot stand for the target's, or "" when it can:
// a draft is verified as target ids, so each id must mean the same bytes.
std::string TokenizerMismatch(const Tokenizer& draft, const Tokenizer& target) {
  if (draft.vocab_size() != target.vocab_size()) {
    return absl::StrCat("it defines ", draft.vocab_size(),
                        " ids and the served model's ", target.vocab_size());
  }
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    if (draft.TokenBytes(id) != target.TokenBytes(id) ||
        draft.IsSpecial(id) != target.IsSpecial(id)) {
      return absl::StrCat("id ", id, " differs");
    }
  }
  return "";
}

}  // namespace

absl::StatusOr<std::unique_ptr<ModelDrafter>> ModelDrafter::Load(
    ModelDir& dir, Backend& backend, const Tokenizer& target,
    const ModelDrafterOptions& options) {
  if (options.max_sequences < 1 || options.max_draft_tokens < 1 ||
      options.catch_up_rows < 1) {
    return absl::InvalidArgumentError(
        "a draft model needs max_sequences, max_draft_tokens and "
        "catch_up_rows >= 1");
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<Tokenizer> tokenizer,
      ParseTokenizerFile(dir.tokenizer_json(), dir.FilePath("tokenizer.json")));
  if (const std::string why = TokenizerMismatch(*tokenizer, target);
      !why.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft model ", dir.FilePath("tokenizer.json"),
                     " is not the served model's tokenizer: ", why));
  }
  ModelLimits limits;
  limits.max_slots = 2 * options.max_sequences;
  // A Propose's first step: catch-up rows, read again in the spares, and
  // each drafting sequence's last context token.
  limits.max_rows_per_step =
      2 * options.catch_up_rows + 2 * options.max_sequences;
  limits.max_logit_rows = options.max_sequences;
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model,
                   Model::Load(dir, backend, limits));
  if (model->vocab_size() < target.vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft model ", dir.FilePath("config.json"), " has ",
                     model->vocab_size(), " embedding rows for ",
                     target.vocab_size(), " token ids"));
  }
  return std::unique_ptr<ModelDrafter>(
      new ModelDrafter(std::move(model), options, target.vocab_size()));
}

absl::StatusOr<std::unique_ptr<ModelDrafter>> ModelDrafter::Open(
    const std::string& dir, Backend& backend, const Tokenizer& target,
    const ModelDrafterOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ModelDir> opened, ModelDir::Open(dir));
  return Load(*opened, backend, target, options);
}

ModelDrafter::ModelDrafter(std::unique_ptr<Model> model,
                           ModelDrafterOptions options, int32_t vocab_limit)
    : model_(std::move(model)),
      options_(options),
      vocab_limit_(vocab_limit),
      logits_(static_cast<size_t>(options.max_sequences) *
              model_->vocab_size()) {}

ModelDrafter::Entry* ModelDrafter::EntryFor(const void* key) {
  auto it = seqs_.find(key);
  if (it != seqs_.end()) return &it->second;
  SlotArena& arena = model_->arena();
  if (arena.free_slots() < 2) return nullptr;
  Entry e;
  e.slot = *arena.Acquire();
  e.spare = *arena.Acquire();
  return &seqs_.emplace(key, e).first->second;
}

void ModelDrafter::Forget(const void* key) {
  auto it = seqs_.find(key);
  if (it == seqs_.end()) return;
  model_->arena().Release(it->second.slot);
  model_->arena().Release(it->second.spare);
  seqs_.erase(it);
}

int32_t ModelDrafter::ArgMax(int row) const {
  const float* l = logits_.data() + int64_t{row} * model_->vocab_size();
  return static_cast<int32_t>(std::max_element(l, l + vocab_limit_) - l);
}

absl::Status ModelDrafter::Step() {
  if (rows_.n() == 0) return absl::OkStatus();
  return model_->Forward(rows_, logits_.data());
}

absl::Status ModelDrafter::Propose(std::vector<Ask>& asks) {
  struct Live {
    Ask* ask;
    int spare;
  };
  std::vector<Live> live;
  rows_.clear();
  int64_t budget = options_.catch_up_rows;
  for (Ask& ask : asks) {
    ask.draft.clear();
    const std::vector<int32_t>& prompt = *ask.prompt;
    const std::vector<int32_t>& output = *ask.output;
    const int64_t p = static_cast<int64_t>(prompt.size());
    const int64_t n = p + static_cast<int64_t>(output.size());
    if (n == 0 || ask.max_tokens < 1 ||
        static_cast<int32_t>(live.size()) == options_.max_sequences) {
      continue;
    }
    Entry* e = EntryFor(ask.key);
    if (e == nullptr) continue;
    auto token = [&](int64_t i) { return i < p ? prompt[i] : output[i - p]; };
    const int64_t fed = e->fed;
    const int64_t behind = n - 1 - fed;
    const int64_t c = std::min(behind, budget);
    budget -= c;
    if (c > 0) {
      rows_.segs.push_back({e->slot, rows_.n(), static_cast<int32_t>(c)});
      for (int64_t i = fed; i < fed + c; ++i) rows_.ids.push_back(token(i));
      e->fed += c;
    }
    if (c < behind) continue;  // drafts once it has caught up
    // In op order before the step: the spare starts from the state before
    // the catch-up rows, which it reads again with the last token.
    model_->arena().CopySlot(e->spare, e->slot);
    rows_.segs.push_back({e->spare, rows_.n(), static_cast<int32_t>(n - fed)});
    for (int64_t i = fed; i < n; ++i) rows_.ids.push_back(token(i));
    rows_.logit_rows.push_back(rows_.n() - 1);
    live.push_back({&ask, e->spare});
  }
  absl::Status s = Step();
  for (int32_t k = 1; s.ok() && !live.empty(); ++k) {
    for (size_t j = 0; j < live.size(); ++j) {
      live[j].ask->draft.push_back(ArgMax(static_cast<int>(j)));
    }
    std::vector<Live> going;
    rows_.clear();
    for (const Live& l : live) {
      if (static_cast<int32_t>(l.ask->draft.size()) >= l.ask->max_tokens)
        continue;
      rows_.segs.push_back({l.spare, rows_.n(), 1});
      rows_.logit_rows.push_back(rows_.n());
      rows_.ids.push_back(l.ask->draft.back());
      going.push_back(l);
    }
    live = std::move(going);
    s = Step();
  }
  if (!s.ok()) {
    for (Ask& ask : asks) {
      ask.draft.clear();
      Forget(ask.key);
    }
  }
  return s;
}

}  // namespace seqboat
