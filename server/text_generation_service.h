// The seqboat.v1.TextGeneration service on gRPC's callback API: Generate
// validates and tokenizes on the gRPC thread, then hands the request to the
// engine with a GenerateStream as its sink; Tokenize and GetModelInfo answer
// from the engine's tokenizer and configuration. With API keys, every method
// first checks the call's `authorization: Bearer KEY` metadata and answers
// UNAUTHENTICATED, naming nothing secret, when it is missing or no key.
#ifndef SEQBOAT_SERVER_TEXT_GENERATION_SERVICE_H_
#define SEQBOAT_SERVER_TEXT_GENERATION_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/random/random.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "seqboat/v1/generate.grpc.pb.h"
#include "server/api_keys.h"
#include "server/request_validation.h"
#include "server/serving_metrics.h"
#include "server/tenant_quotas.h"

namespace seqboat {

// Generate and Tokenize are raw methods (ByteBuffer in, parsed here): gRPC
// answers a request it cannot parse UNIMPLEMENTED with no message, which
// tells a client the method does not exist; this says INVALID_ARGUMENT.
using TextGenerationBase = v1::TextGeneration::WithRawCallbackMethod_Generate<
    v1::TextGeneration::WithRawCallbackMethod_Tokenize<
        v1::TextGeneration::CallbackService>>;

class TextGenerationService final : public TextGenerationBase {
 public:
  // `engine` must outlive the service. `limits.max_prompt_tokens` and
  // `limits.max_new_tokens_limit` should match the engine's options.
  // `metrics`, if set, records every Generate call and must outlive the
  // engine's last event. `api_keys`, if set, must outlive the service; its
  // tenants each have their own part of the prefix cache unless
  // `share_prefix_cache`. `quotas`, if set, bound each tenant's Generate
  // calls (RESOURCE_EXHAUSTED with `retry-after` seconds in the trailers)
  // and must outlive the engine's last event.
  TextGenerationService(Engine* engine, ValidationLimits limits,
                        ServingMetrics* metrics = nullptr,
                        const ApiKeyStore* api_keys = nullptr,
                        bool share_prefix_cache = false,
                        TenantQuotas* quotas = nullptr);

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(
      grpc::CallbackServerContext* context,
      const grpc::ByteBuffer* request) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const v1::GetModelInfoRequest* request,
                                         v1::ModelInfo* response) override;

  // Generate calls not yet finished (their last message not yet sent).
  int active_streams() const { return active_streams_.load(); }

 private:
  // The tenant of the call's key; UNAUTHENTICATED when keys are required and
  // the call has none of them. Without keys, every call is the tenant "".
  absl::StatusOr<std::string> Authorize(
      const grpc::CallbackServerContext& context) const;
  // Random values for unset seeds and request ids.
  uint64_t NextRandom();
  grpc::Status TokenizeParsed(const v1::TokenizeRequest& request,
                              v1::TokenizeResponse* response);

  Engine& engine_;
  const ValidationLimits limits_;
  const Vocabulary vocabulary_;
  ServingMetrics* const metrics_;      // may be null
  const ApiKeyStore* const api_keys_;  // null: no keys asked for
  const bool share_prefix_cache_;
  TenantQuotas* const quotas_;  // may be null
  std::atomic<int> active_streams_{0};
  absl::Mutex rng_mu_;
  absl::BitGen rng_ ABSL_GUARDED_BY(rng_mu_);
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_TEXT_GENERATION_SERVICE_H_
