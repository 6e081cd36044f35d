#include "engine/speculative/drafters.h"

#include <algorithm>
#include <utility>

#include "base/status_macros.h"
#include "spdlog/spdlog.h"

namespace seqboat {

absl::StatusOr<Drafters> LoadDrafters(const DrafterOptions& options,
                                      const ModelDir& dir, Model& target,
                                      const Tokenizer& tokenizer) {
  Drafters out;
  const int32_t sequences = std::max(1, options.max_sequences);
  const int32_t tokens = std::max(1, options.max_draft_tokens);
  if (!options.draft_model_dir.empty()) {
    ModelDrafterOptions d;
    d.max_sequences = sequences;
    d.max_draft_tokens = tokens;
    d.catch_up_rows = options.catch_up_rows;
    ASSIGN_OR_RETURN(
        out.model, ModelDrafter::Open(options.draft_model_dir, target.backend(),
                                      tokenizer, d));
    spdlog::info("draft model {}: {} layers, {} slots", options.draft_model_dir,
                 out.model->model().layers().size(), 2 * d.max_sequences);
  }
  ASSIGN_OR_RETURN(const bool head, MtpDrafter::HasHead(dir));
  if (head) {
    MtpDrafterOptions m;
    m.max_sequences = sequences;
    m.max_draft_tokens = tokens;
    m.vocab_limit = tokenizer.vocab_size();
    // The model serves without a head it cannot use (a checkpoint that ships
    // part of one): only the mtp method is refused then, by name.
    absl::StatusOr<std::unique_ptr<MtpDrafter>> mtp =
        MtpDrafter::Load(dir, target, m);
    if (mtp.ok()) {
      out.mtp = *std::move(mtp);
      spdlog::info("multi-token-prediction head: {} slots",
                   2 * m.max_sequences);
    } else {
      spdlog::warn("multi-token-prediction head not loaded, method mtp off: {}",
                   mtp.status().ToString());
    }
  }
  return out;
}

}  // namespace seqboat
