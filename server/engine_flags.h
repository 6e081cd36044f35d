// The flags that size the engine and bound requests (slots, queue, step
// budget, prompt and output limits, the prefix cache and its disk tier,
// speculative decoding): their definitions, their checks, and the
// EngineOptions and ValidationLimits the server builds from them.
#ifndef SEQBOAT_SERVER_ENGINE_FLAGS_H_
#define SEQBOAT_SERVER_ENGINE_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/request.h"
#include "server/request_validation.h"
#include "server/serving_metrics.h"

namespace seqboat {

// INVALID_ARGUMENT naming the first flag of these out of its range.
absl::Status CheckEngineFlags();
// The engine's options for the model in `model_dir`; its observers record
// into `metrics`, which must outlive the engine.
EngineOptions EngineOptionsFromFlags(const std::string& model_dir,
                                     ServingMetrics& metrics);
// --speculative_method and --num_speculative_tokens as the requests'
// default; INVALID_ARGUMENT naming the flag when either is out of range.
absl::StatusOr<SpeculativeParams> SpeculativeDefault(
    const EngineOptions& options);
// What both front ends check requests against.
ValidationLimits LimitsFromFlags(const EngineOptions& options);
// What the loaded model adds to `limits` (whether it has an MTP head), and
// the default speculation logged; FAILED_PRECONDITION, naming the flag, when
// the default method is mtp and the model has no head.
absl::Status LimitsForModel(const ModelSummary& summary,
                            const EngineOptions& options,
                            ValidationLimits& limits);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_ENGINE_FLAGS_H_
