// Draft-model drafting: a second, smaller model with the target's tokenizer
// guesses each speculating sequence's next tokens, greedily, from state of
// its own. A sequence holds two of the drafter's slots: one that has read its
// context up to the last token (one behind, as the target's slot is), and a
// spare, copied from it in op order before each draft, in which the draft
// runs, so that tokens the target rejects never reach the first. The drafts
// decide only how much a verification step gains: the output is the
// target's own draws either way. Engine thread only.
#ifndef SEQBOAT_ENGINE_SPECULATIVE_MODEL_DRAFTER_H_
#define SEQBOAT_ENGINE_SPECULATIVE_MODEL_DRAFTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/backend/step_rows.h"
#include "engine/model/model.h"
#include "engine/model_dir/model_dir.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

struct ModelDrafterOptions {
  int32_t max_sequences = 8;     // sequences drafting at once
  int32_t max_draft_tokens = 8;  // the longest draft asked for
  // Context rows a Propose reads for sequences catching up (a prompt the
  // drafter has not seen): at most this many, so a long prompt costs
  // several steps of no drafts rather than one long step.
  int32_t catch_up_rows = 512;
};

class ModelDrafter {
 public:
  // The model of `dir` on `backend` (shared with the target), with two slots
  // per sequence. Its tokenizer must be `target`'s: the same ids for the
  // same bytes and the same EOS, else INVALID_ARGUMENT naming the first
  // difference.
  static absl::StatusOr<std::unique_ptr<ModelDrafter>> Load(
      ModelDir& dir, Backend& backend, const Tokenizer& target,
      const ModelDrafterOptions& options);
  // The same from a directory's path (ModelDir::Open).
  static absl::StatusOr<std::unique_ptr<ModelDrafter>> Open(
      const std::string& dir, Backend& backend, const Tokenizer& target,
      const ModelDrafterOptions& options);

  struct Ask {
    const void* key = nullptr;  // the sequence, until Forget(key)
    // Its context: the prompt, then the output so far (not empty).
    const std::vector<int32_t>* prompt = nullptr;
    const std::vector<int32_t>* output = nullptr;
    int32_t max_tokens = 0;      // in [1, max_draft_tokens]
    std::vector<int32_t> draft;  // out: empty while it catches up
  };
  // Drafts max_tokens tokens for each ask (greedy, ties to the lower id)
  // in max_tokens steps of the draft model. An ask whose key has no slots
  // takes two, or drafts nothing when none are free. On error every ask's
  // state is dropped (the next Propose starts it again).
  absl::Status Propose(std::vector<Ask>& asks);
  // The sequence ended: its slots go back.
  void Forget(const void* key);

  const Model& model() const { return *model_; }
  int32_t sequences() const { return static_cast<int32_t>(seqs_.size()); }

 private:
  struct Entry {
    int slot = -1;
    int spare = -1;
    int64_t fed = 0;  // context tokens the slot has read
  };

  ModelDrafter(std::unique_ptr<Model> model, ModelDrafterOptions options,
               int32_t vocab_limit);
  // The entry of `key`, taking its slots; null when none are free.
  Entry* EntryFor(const void* key);
  // Runs rows_ (nothing when empty), its logits into logits_.
  absl::Status Step();
  int32_t ArgMax(int row) const;

  std::unique_ptr<Model> model_;
  ModelDrafterOptions options_;
  int32_t vocab_limit_;  // ids a draft may hold: the tokenizer's
  absl::flat_hash_map<const void*, Entry> seqs_;
  StepRows rows_;
  std::vector<float> logits_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SPECULATIVE_MODEL_DRAFTER_H_
