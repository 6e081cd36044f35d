// What the request fuzz targets share: the vocabulary and limits they
// validate against, and the checks of validation's result (a refusal of the
// documented kind, or a Request inside the bounds generate.proto promises).
// A violation aborts (FUZZ_CHECK).
#ifndef SEQBOAT_FUZZ_REQUEST_CHECKS_H_
#define SEQBOAT_FUZZ_REQUEST_CHECKS_H_

#include "absl/status/statusor.h"
#include "engine/request.h"
#include "engine/tokenizer/tokenizer.h"
#include "seqboat/v1/generate.pb.h"
#include "server/request_validation.h"

namespace seqboat::fuzz {

// byte_bpe.json from the tokenizer_json corpus.
const Tokenizer& RequestTokenizer();
// As the service builds it, for a model with fewer rows than the tokenizer
// has tokens.
const Vocabulary& RequestVocabulary();
// Small, so that inputs of a few bytes reach them.
ValidationLimits RequestLimits();
RequestFallbacks Fallbacks();

// RequestFromProto's result for `proto`: INVALID_ARGUMENT, INTERNAL only for
// a tokenizer id past the model's rows, or a request within every bound.
void CheckValidated(const v1::GenerateRequest& proto,
                    const absl::StatusOr<Request>& request);

}  // namespace seqboat::fuzz

#endif  // SEQBOAT_FUZZ_REQUEST_CHECKS_H_
