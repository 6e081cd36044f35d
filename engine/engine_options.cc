#include "engine/engine_options.h"

#include "absl/strings/str_cat.h"

namespace seqboat {

absl::Status CheckEngineOptions(const EngineOptions& options) {
  if (options.max_slots <= 0 || options.max_queue < 0 ||
      options.step_token_budget <= 0) {
    return absl::InvalidArgumentError(
        "max_slots and step_token_budget must be > 0");
  }
  if (options.grammar_cache_size < 0 || options.grammar_compile_threads < 1 ||
      options.grammar_mask_threads < 1 || options.grammar_mask_threads > 64) {
    return absl::InvalidArgumentError(
        "grammar_cache_size must be >= 0, grammar_compile_threads >= 1 and "
        "grammar_mask_threads in [1, 64]");
  }
  if (options.prefix_cache_bytes < 0) {
    return absl::InvalidArgumentError("prefix_cache_bytes must be >= 0");
  }
  if (options.max_draft_tokens < 0 || options.max_draft_tokens > 64 ||
      (options.speculative_max_batch < 0 &&
       options.speculative_max_batch != kSpeculativeMaxBatchAuto)) {
    return absl::InvalidArgumentError(
        "max_draft_tokens must be in [0, 64] and speculative_max_batch >= 0 "
        "or auto");
  }
  if (options.speculative_auto_draft_tokens < 1 ||
      !(options.speculative_auto_acceptance >= 0 &&
        options.speculative_auto_acceptance <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("speculative_auto_draft_tokens must be >= 1 (got ",
                     options.speculative_auto_draft_tokens,
                     ") and speculative_auto_acceptance in [0, 1] (got ",
                     options.speculative_auto_acceptance, ")"));
  }
  if (!options.prefix_cache_dir.empty() &&
      (options.prefix_cache_disk_bytes <= 0 ||
       options.prefix_cache_bytes <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefix_cache_dir ", options.prefix_cache_dir,
        " needs prefix_cache_disk_bytes > 0 (got ",
        options.prefix_cache_disk_bytes, ") and prefix_cache_bytes > 0 (got ",
        options.prefix_cache_bytes, ")"));
  }
  return absl::OkStatus();
}

}  // namespace seqboat
