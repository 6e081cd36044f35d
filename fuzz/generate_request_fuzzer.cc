// A GenerateRequest from raw bytes, as the service receives it: parsed, then
// validated by RequestFromProto against a real tokenizer. Either the request
// is refused (INVALID_ARGUMENT naming a field; INTERNAL only for a tokenizer
// id past the model's rows), or every field of the engine Request is inside
// the bounds generate.proto promises. The limits are small so that inputs
// of a few bytes reach them.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "fuzz/embedded_tokenizers.h"
#include "fuzz/fuzz_check.h"
#include "google/protobuf/stubs/logging.h"
#include "seqboat/v1/generate.pb.h"
#include "server/request_validation.h"

namespace {

const seqboat::Tokenizer& TheTokenizer() {
  static const auto* const tokenizers =
      new std::vector<std::unique_ptr<seqboat::Tokenizer>>(
          seqboat::fuzz::LoadEmbeddedTokenizers({}));
  for (int i = 0; i < seqboat::fuzz::kNumEmbeddedTokenizers; ++i) {
    if (std::string(seqboat::fuzz::kEmbeddedTokenizers[i].name) ==
        "byte_bpe.json") {
      return *(*tokenizers)[i];
    }
  }
  FUZZ_CHECK(false, "byte_bpe.json is not embedded");
  return *(*tokenizers)[0];
}

bool InRange(float x, float low, float high) {
  return std::isfinite(x) && x >= low && x <= high;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Refused UTF-8 is logged by protobuf on every such input; the fuzzer
  // produces thousands a second.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  seqboat::v1::GenerateRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;

  const seqboat::Tokenizer& tokenizer = TheTokenizer();
  seqboat::Vocabulary vocabulary;
  // As the service builds it, with a model of fewer rows than the tokenizer
  // has tokens.
  vocabulary.size = tokenizer.vocab_size() - 8;
  vocabulary.encode =
      [&tokenizer](
          absl::string_view text) -> absl::StatusOr<std::vector<int32_t>> {
    return tokenizer.Encode(std::string_view(text.data(), text.size()));
  };
  vocabulary.is_special = [&tokenizer](int32_t id) {
    return tokenizer.IsSpecial(id);
  };
  seqboat::ValidationLimits limits;
  limits.max_new_tokens_default = 16;
  limits.max_new_tokens_limit = 64;
  limits.max_prompt_tokens = 32;
  limits.max_prompt_bytes = 256;
  seqboat::RequestFallbacks fallbacks;
  fallbacks.request_id = "fallback-id";
  fallbacks.seed = 7;

  auto request =
      seqboat::RequestFromProto(proto, vocabulary, limits, fallbacks);
  if (!request.ok()) {
    const absl::Status& s = request.status();
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument ||
                   (s.code() == absl::StatusCode::kInternal &&
                    absl::StartsWith(s.message(), "tokenizer produced id")),
               "%s", s.ToString().c_str());
    return 0;
  }

  FUZZ_CHECK(!request->id.empty() &&
             request->id.size() <= seqboat::kMaxRequestIdBytes);
  FUZZ_CHECK(request->id == (proto.request_id().empty() ? fallbacks.request_id
                                                        : proto.request_id()));
  const std::vector<int32_t>& prompt = request->prompt;
  FUZZ_CHECK(!prompt.empty() &&
             prompt.size() <= static_cast<size_t>(limits.max_prompt_tokens));
  bool any_text = false;
  for (int32_t id : prompt) {
    FUZZ_CHECK(id >= 0 && id < vocabulary.size, "prompt id %d", id);
    any_text |= !tokenizer.IsSpecial(id);
  }
  if (proto.has_token_ids()) FUZZ_CHECK(any_text);

  const seqboat::SamplingParams& sampling = request->sampling;
  FUZZ_CHECK(InRange(sampling.temperature, 0, seqboat::kMaxTemperature));
  FUZZ_CHECK(sampling.top_k >= 0);
  FUZZ_CHECK(InRange(sampling.top_p, 0, 1) && sampling.top_p > 0);
  FUZZ_CHECK(InRange(sampling.min_p, 0, 1));
  FUZZ_CHECK(
      InRange(sampling.repetition_penalty, 0, seqboat::kMaxRepetitionPenalty) &&
      sampling.repetition_penalty > 0);
  FUZZ_CHECK(
      sampling.seed ==
      (proto.sampling().has_seed() ? proto.sampling().seed() : fallbacks.seed));

  const seqboat::StoppingParams& stopping = request->stopping;
  FUZZ_CHECK(stopping.max_new_tokens >= 1 &&
             stopping.max_new_tokens <= limits.max_new_tokens_limit);
  FUZZ_CHECK(stopping.stop_strings.size() <= seqboat::kMaxStopStrings);
  for (const std::string& stop : stopping.stop_strings) {
    FUZZ_CHECK(!stop.empty() && stop.size() <= seqboat::kMaxStopStringBytes);
  }
  FUZZ_CHECK(stopping.stop_token_ids.size() <= seqboat::kMaxStopTokenIds);
  for (int32_t id : stopping.stop_token_ids) {
    FUZZ_CHECK(id >= 0 && id < vocabulary.size, "stop id %d", id);
  }
  FUZZ_CHECK(request->top_logprobs >= 0 &&
             request->top_logprobs <= seqboat::kMaxTopLogprobs);
  if (request->top_logprobs > 0) FUZZ_CHECK(request->logprobs);
  return 0;
}
