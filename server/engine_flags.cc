#include "server/engine_flags.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(int32_t, max_slots, 64, "Concurrent sequences (state slots).");
ABSL_FLAG(int64_t, prefix_cache_bytes, int64_t{1} << 30,
          "Host memory for prefix-state snapshots (a conversation's next turn "
          "resumes from the end of the last one); 0 disables prefix reuse.");
ABSL_FLAG(std::string, prefix_cache_dir, "",
          "Directory for the prefix cache's disk tier: snapshots evicted from "
          "memory are written there and read back by a later turn or a "
          "restarted server of the same model; a drain writes the ones in "
          "memory too. Empty: no disk tier.");
ABSL_FLAG(int64_t, prefix_cache_disk_bytes, int64_t{8} << 30,
          "Byte budget of --prefix_cache_dir (least recently used files go "
          "first).");
ABSL_FLAG(bool, prefix_cache_disk_write_through, false,
          "Write every snapshot to --prefix_cache_dir as it is taken, not "
          "only when memory evicts it, so that a replica killed without a "
          "drain finds its conversations on disk when it restarts.");
ABSL_FLAG(int32_t, max_queue, 256,
          "Requests waiting for a slot before RESOURCE_EXHAUSTED.");
ABSL_FLAG(int32_t, step_token_budget, 512,
          "Decode plus prefill tokens per engine step.");
ABSL_FLAG(int32_t, max_new_tokens_default, 256,
          "max_new_tokens when a request leaves it unset.");
ABSL_FLAG(int32_t, max_new_tokens_limit, 4096,
          "Largest max_new_tokens a request may ask for.");
ABSL_FLAG(int32_t, max_prompt_tokens, 32768,
          "Longest prompt accepted, in tokens.");
ABSL_FLAG(int32_t, max_prompt_bytes, 0,
          "Longest text accepted by Generate and Tokenize, in bytes, checked "
          "before tokenizing; 0: 16 bytes per token of --max_prompt_tokens.");
ABSL_FLAG(std::string, speculative_method, "none",
          "Speculative decoding for requests that name no method: none, "
          "prompt_lookup (drafts from n-gram matches against prompt and "
          "output), draft_model (--speculative_draft_model_dir's guesses) or "
          "mtp (the model's multi-token-prediction head, where its config "
          "has one); the output is unchanged, only sooner.");
ABSL_FLAG(std::string, speculative_draft_model_dir, "",
          "A smaller model with the served model's tokenizer, loaded beside "
          "it to draft for requests whose speculative method is draft_model "
          "(two state slots per sequence of --speculative_max_batch).");
ABSL_FLAG(int32_t, num_speculative_tokens, 4,
          "Tokens drafted per step where speculative decoding is on and the "
          "request names no count.");
ABSL_FLAG(int32_t, max_draft_tokens, 8,
          "Ceiling of a request's speculative num_draft_tokens.");
ABSL_FLAG(std::string, speculative_max_batch, "auto",
          "Speculative decoding runs while at most this many sequences run "
          "(beyond it a step is no longer bound by reading the weights); 0 "
          "turns it off; auto measures it at start-up on the loaded model "
          "(the largest batch, up to 32 and half of --max_slots, whose round "
          "of --num_speculative_tokens drafts costs less than the tokens it "
          "yields) and logs it.");
ABSL_FLAG(bool, speculative_adaptive_draft_length, true,
          "Each sequence drafts fewer tokens while its drafts are rejected "
          "and more, up to its request's count, while they are taken; false: "
          "always the request's count.");

namespace seqboat {
namespace {

// --speculative_max_batch: a count >= 0, or auto (kSpeculativeMaxBatchAuto).
absl::StatusOr<int32_t> SpeculativeMaxBatchFlag() {
  const std::string flag = absl::GetFlag(FLAGS_speculative_max_batch);
  if (flag == "auto") return kSpeculativeMaxBatchAuto;
  int32_t n = 0;
  if (!absl::SimpleAtoi(flag, &n) || n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--speculative_max_batch must be auto or a count >= 0, got ", flag));
  }
  return n;
}

}  // namespace

absl::Status CheckEngineFlags() {
  auto positive = [](absl::string_view name, int32_t value) {
    return value > 0 ? absl::OkStatus()
                     : absl::InvalidArgumentError(absl::StrCat(
                           "--", name, " must be > 0, got ", value));
  };
  for (const auto& [name, value] :
       {std::pair<absl::string_view, int32_t>{"max_slots",
                                              absl::GetFlag(FLAGS_max_slots)},
        {"step_token_budget", absl::GetFlag(FLAGS_step_token_budget)},
        {"max_new_tokens_default", absl::GetFlag(FLAGS_max_new_tokens_default)},
        {"max_new_tokens_limit", absl::GetFlag(FLAGS_max_new_tokens_limit)},
        {"max_prompt_tokens", absl::GetFlag(FLAGS_max_prompt_tokens)}}) {
    absl::Status status = positive(name, value);
    if (!status.ok()) return status;
  }
  if (absl::GetFlag(FLAGS_max_prompt_bytes) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_prompt_bytes must be >= 0, got ",
                     absl::GetFlag(FLAGS_max_prompt_bytes)));
  }
  if (absl::GetFlag(FLAGS_prefix_cache_bytes) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--prefix_cache_bytes must be >= 0, got ",
                     absl::GetFlag(FLAGS_prefix_cache_bytes)));
  }
  if (!absl::GetFlag(FLAGS_prefix_cache_dir).empty() &&
      (absl::GetFlag(FLAGS_prefix_cache_disk_bytes) <= 0 ||
       absl::GetFlag(FLAGS_prefix_cache_bytes) <= 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--prefix_cache_dir needs --prefix_cache_disk_bytes > 0 (got ",
        absl::GetFlag(FLAGS_prefix_cache_disk_bytes),
        ") and --prefix_cache_bytes > 0 (got ",
        absl::GetFlag(FLAGS_prefix_cache_bytes), ")"));
  }
  if (absl::Status s = SpeculativeMaxBatchFlag().status(); !s.ok()) return s;
  if (absl::GetFlag(FLAGS_max_queue) < 0) {
    return absl::InvalidArgumentError("--max_queue must be >= 0");
  }
  if (absl::GetFlag(FLAGS_max_new_tokens_default) >
      absl::GetFlag(FLAGS_max_new_tokens_limit)) {
    return absl::InvalidArgumentError(
        "--max_new_tokens_default must not exceed --max_new_tokens_limit");
  }
  return absl::OkStatus();
}

// The engine's options; its observers record into `metrics`.
EngineOptions EngineOptionsFromFlags(const std::string& model_dir,
                                     ServingMetrics& metrics) {
  EngineOptions options;
  options.model_dir = model_dir;
  options.max_slots = absl::GetFlag(FLAGS_max_slots);
  options.max_queue = absl::GetFlag(FLAGS_max_queue);
  options.step_token_budget = absl::GetFlag(FLAGS_step_token_budget);
  options.max_prompt_tokens = absl::GetFlag(FLAGS_max_prompt_tokens);
  options.max_new_tokens_limit = absl::GetFlag(FLAGS_max_new_tokens_limit);
  options.prefix_cache_bytes = absl::GetFlag(FLAGS_prefix_cache_bytes);
  options.max_draft_tokens = absl::GetFlag(FLAGS_max_draft_tokens);
  // Checked by CheckEngineFlags.
  options.speculative_max_batch =
      SpeculativeMaxBatchFlag().value_or(kSpeculativeMaxBatchAuto);
  options.speculative_auto_draft_tokens =
      std::max(1, absl::GetFlag(FLAGS_num_speculative_tokens));
  options.adaptive_draft_length =
      absl::GetFlag(FLAGS_speculative_adaptive_draft_length);
  options.draft_model_dir = absl::GetFlag(FLAGS_speculative_draft_model_dir);
  options.prefix_cache_dir = absl::GetFlag(FLAGS_prefix_cache_dir);
  options.prefix_cache_disk_bytes =
      absl::GetFlag(FLAGS_prefix_cache_disk_bytes);
  options.prefix_cache_disk_write_through =
      absl::GetFlag(FLAGS_prefix_cache_disk_write_through);
  options.on_step = [&metrics](absl::Duration time, int32_t batch) {
    metrics.OnStep(time, batch);
  };
  options.on_admit = [&metrics](absl::Duration queued) {
    metrics.OnAdmit(queued);
  };
  return options;
}

// --speculative_method and --num_speculative_tokens as the requests'
// default.
absl::StatusOr<SpeculativeParams> SpeculativeDefault(
    const EngineOptions& options) {
  SpeculativeParams spec;
  const std::string method = absl::GetFlag(FLAGS_speculative_method);
  const int32_t k = absl::GetFlag(FLAGS_num_speculative_tokens);
  if (method == "none") return spec;
  if (method != "prompt_lookup" && method != "draft_model" && method != "mtp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--speculative_method must be none, prompt_lookup, "
                     "draft_model or mtp, got ",
                     method));
  }
  if (method == "draft_model" && options.draft_model_dir.empty()) {
    return absl::InvalidArgumentError(
        "--speculative_method=draft_model needs "
        "--speculative_draft_model_dir");
  }
  if (k < 1 || k > options.max_draft_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat("--num_speculative_tokens must be in [1, "
                     "--max_draft_tokens = ",
                     options.max_draft_tokens, "], got ", k));
  }
  spec.method = method == "draft_model" ? SpeculativeMethod::kDraftModel
                : method == "mtp"       ? SpeculativeMethod::kMtp
                                        : SpeculativeMethod::kPromptLookup;
  spec.num_draft_tokens = k;
  return spec;
}

// What both front ends check requests against.
ValidationLimits LimitsFromFlags(const EngineOptions& options) {
  ValidationLimits limits;
  limits.max_draft_tokens = options.max_draft_tokens;
  limits.draft_model = !options.draft_model_dir.empty();
  limits.max_new_tokens_default = absl::GetFlag(FLAGS_max_new_tokens_default);
  limits.max_new_tokens_limit = options.max_new_tokens_limit;
  limits.max_prompt_tokens = options.max_prompt_tokens;
  limits.max_n = std::min(kMaxN, options.max_slots);
  limits.max_prompt_bytes =
      absl::GetFlag(FLAGS_max_prompt_bytes) > 0
          ? absl::GetFlag(FLAGS_max_prompt_bytes)
          : static_cast<int32_t>(std::min<int64_t>(
                int64_t{16} * options.max_prompt_tokens, 1 << 30));
  return limits;
}

absl::Status LimitsForModel(const ModelSummary& summary,
                            const EngineOptions& options,
                            ValidationLimits& limits) {
  limits.mtp_head = summary.mtp_head;
  if (limits.speculative_default.method == SpeculativeMethod::kMtp &&
      !summary.mtp_head) {
    return absl::FailedPreconditionError(
        absl::StrCat("--speculative_method=mtp: ", options.model_dir,
                     " has no multi-token-prediction head (config.json "
                     "\"mtp\")"));
  }
  const SpeculativeParams& spec = limits.speculative_default;
  if (spec.method != SpeculativeMethod::kNone) {
    spdlog::info(
        "speculative decoding by default: {}, {} draft tokens, while at most "
        "{} sequences run",
        SpeculativeMethodName(spec.method), spec.num_draft_tokens,
        options.speculative_max_batch);
  }
  return absl::OkStatus();
}

}  // namespace seqboat
