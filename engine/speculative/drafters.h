// The drafters an engine serves with: the draft model when one is named,
// the MTP head when the served model's config carries one ("mtp").
#ifndef SEQBOAT_ENGINE_SPECULATIVE_DRAFTERS_H_
#define SEQBOAT_ENGINE_SPECULATIVE_DRAFTERS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/model_dir/model_dir.h"
#include "engine/speculative/model_drafter.h"
#include "engine/speculative/mtp_drafter.h"
#include "engine/tokenizer/tokenizer.h"

namespace seqboat {

struct DrafterOptions {
  std::string draft_model_dir;  // empty: no draft model
  int32_t max_sequences = 1;    // sequences drafting at once
  int32_t max_draft_tokens = 1;
  int32_t catch_up_rows = 512;  // the draft model's, per Propose
};

struct Drafters {
  std::unique_ptr<ModelDrafter> model;  // null: none
  std::unique_ptr<MtpDrafter> mtp;      // null: the model has no head
};

// Loads both onto the served model's backend; an error names the file.
absl::StatusOr<Drafters> LoadDrafters(const DrafterOptions& options,
                                      const ModelDir& dir, Model& target,
                                      const Tokenizer& tokenizer);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SPECULATIVE_DRAFTERS_H_
