// What a request asks of sampling and what sampling reports per token: the
// parameters the host Sampler and Backend::SampleRows follow, and the
// log-probabilities of a chosen token and its best rivals. Plain data below
// the engine, so that backends and the server share one definition.
#ifndef SEQBOAT_ENGINE_BACKEND_SAMPLING_PARAMS_H_
#define SEQBOAT_ENGINE_BACKEND_SAMPLING_PARAMS_H_

#include <cstdint>
#include <vector>

namespace seqboat {

// Sampling parameters, already validated by the server (see proto comments).
struct SamplingParams {
  float temperature = 1.0f;  // 0 means greedy
  int32_t top_k = 0;         // 0 means off
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;  // 1 means off
  // OpenAI's penalties over the tokens generated so far (not the prompt):
  // a generated token's logit loses frequency_penalty per time it was
  // generated, then presence_penalty once. 0 means off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
};

struct TokenLogprob {
  int32_t token_id = 0;
  float logprob = 0.0f;
};

struct TokenLogprobs {
  TokenLogprob chosen;
  std::vector<TokenLogprob> top;  // best first
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_BACKEND_SAMPLING_PARAMS_H_
