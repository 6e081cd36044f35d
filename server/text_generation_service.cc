#include "server/text_generation_service.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/generate_stream.h"
#include "server/grpc_status.h"
#include "server/session_key.h"
#include "spdlog/spdlog.h"

namespace seqboat {
namespace {

// gRPC reports "no deadline" as the largest time_point, which would overflow
// a conversion; anything a century out counts as none.
absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline >=
      std::chrono::system_clock::now() + std::chrono::hours(24 * 365 * 100)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

constexpr char kUnauthenticated[] =
    "missing or unknown API key: send `authorization: Bearer KEY` metadata";

constexpr char kUnparsable[] =
    "the request could not be parsed (a malformed field, or a string that "
    "is not valid UTF-8) as seqboat.v1.";

}  // namespace

TextGenerationService::TextGenerationService(
    Engine* engine, ValidationLimits limits, ServingMetrics* metrics,
    const ApiKeyStore* api_keys, bool share_prefix_cache, TenantQuotas* quotas)
    : engine_(*engine),
      limits_(limits),
      vocabulary_(TokenizerVocabulary(engine->tokenizer(),
                                      engine->summary().prompt_rules)),
      metrics_(metrics),
      api_keys_(api_keys),
      share_prefix_cache_(share_prefix_cache),
      quotas_(quotas) {}

absl::StatusOr<std::string> TextGenerationService::Authorize(
    const grpc::CallbackServerContext& context) const {
  if (api_keys_ == nullptr) return std::string();
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  std::optional<std::string> tenant = api_keys_->Authorize(
      it == metadata.end()
          ? absl::string_view()
          : absl::string_view(it->second.data(), it->second.size()));
  if (!tenant.has_value()) return absl::UnauthenticatedError(kUnauthenticated);
  return *std::move(tenant);
}

uint64_t TextGenerationService::NextRandom() {
  absl::MutexLock lock(&rng_mu_);
  return absl::Uniform<uint64_t>(rng_);
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* TextGenerationService::Generate(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes) {
  v1::GenerateRequest parsed;
  const v1::GenerateRequest* proto = &parsed;
  absl::StatusOr<std::string> tenant = Authorize(*context);
  if (!tenant.ok() || !ParseFromByteBuffer(*bytes, &parsed)) {
    active_streams_.fetch_add(1);
    auto* stream = new GenerateStream(
        "", std::make_shared<RequestControl>(),
        [this] { active_streams_.fetch_sub(1); }, metrics_);
    stream->Fail(!tenant.ok() ? ToGrpcStatus(tenant.status())
                              : grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                             absl::StrCat(kUnparsable,
                                                          "GenerateRequest")));
    return stream;
  }
  RequestFallbacks fallbacks;
  fallbacks.request_id = absl::StrFormat("req-%016x", NextRandom());
  fallbacks.seed = NextRandom();
  if (!share_prefix_cache_) fallbacks.cache_tenant = *tenant;
  absl::StatusOr<Request> request =
      RequestFromProto(*proto, vocabulary_, limits_, fallbacks);

  auto control = std::make_shared<RequestControl>();
  active_streams_.fetch_add(1);
  auto* stream = new GenerateStream(
      request.ok() ? request->id : proto->request_id(), control,
      [this] { active_streams_.fetch_sub(1); }, metrics_);
  if (!request.ok()) {
    spdlog::debug("rejected request: {}", request.status().ToString());
    stream->Fail(ToGrpcStatus(request.status()));
    return stream;
  }
  // The seed is logged so that a sampled answer can be reproduced.
  spdlog::debug(
      "request {} accepted: prompt_tokens={} max_new_tokens={} seed={}",
      request->id, request->prompt.size(), request->stopping.max_new_tokens,
      request->sampling.seed);
  // The conversation's key, for the balancer's next routing of it.
  const auto& metadata = context->client_metadata();
  const auto sent = metadata.find(kSessionHeader);
  absl::StatusOr<std::string> session =
      SessionKey(sent == metadata.end()
                     ? std::nullopt
                     : std::optional<absl::string_view>(absl::string_view(
                           sent->second.data(), sent->second.size())),
                 request->cache_scope, request->prompt);
  if (!session.ok()) {
    stream->Fail(ToGrpcStatus(session.status()));
    return stream;
  }
  context->AddInitialMetadata(kSessionHeader, *session);
  request->control = control;
  request->tenant = *tenant;
  request->sink = stream->sink(request->n, *tenant);
  request->deadline = DeadlineOf(*context);
  request->arrival = absl::Now();
  if (quotas_ != nullptr) {
    absl::Duration retry_after;
    if (absl::Status over = quotas_->Admit(*request, absl::Now(), &retry_after);
        !over.ok()) {
      context->AddTrailingMetadata(
          "retry-after", absl::StrCat(absl::ToInt64Seconds(
                             absl::Ceil(retry_after, absl::Seconds(1)))));
      stream->Fail(ToGrpcStatus(over));
      return stream;
    }
  }
  const std::string tenant_name = request->tenant;
  const int32_t n = request->n;
  // RESOURCE_EXHAUSTED (queue full), UNAVAILABLE (draining) and
  // INVALID_ARGUMENT keep their codes on the wire.
  absl::Status submitted = engine_.Submit(*std::move(request));
  if (!submitted.ok()) {
    if (quotas_ != nullptr) quotas_->Refused(tenant_name, n);
    stream->Fail(ToGrpcStatus(submitted));
  }
  return stream;
}

grpc::ServerUnaryReactor* TextGenerationService::Tokenize(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* bytes,
    grpc::ByteBuffer* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::StatusOr<std::string> tenant = Authorize(*context); !tenant.ok()) {
    reactor->Finish(ToGrpcStatus(tenant.status()));
    return reactor;
  }
  v1::TokenizeRequest request;
  if (!ParseFromByteBuffer(*bytes, &request)) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 absl::StrCat(kUnparsable, "TokenizeRequest")));
    return reactor;
  }
  v1::TokenizeResponse response;
  grpc::Status status = TokenizeParsed(request, &response);
  if (status.ok()) *reply = SerializeToByteBuffer(response);
  reactor->Finish(std::move(status));
  return reactor;
}

grpc::Status TextGenerationService::TokenizeParsed(
    const v1::TokenizeRequest& request, v1::TokenizeResponse* response) {
  const Tokenizer& tokenizer = engine_.tokenizer();
  // Bounded like a Generate prompt: the input before tokenizing, the reply
  // after (a default client refuses messages over 4 MiB).
  if (absl::Status s = CheckTextBytes("text", request.text(), limits_);
      !s.ok()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        std::string(s.message()));
  }
  std::vector<int32_t> ids = tokenizer.Encode(request.text());
  if (ids.size() > static_cast<size_t>(limits_.max_prompt_tokens)) {
    return grpc::Status(
        grpc::StatusCode::INVALID_ARGUMENT,
        absl::StrCat("text is ", ids.size(), " tokens, the limit is ",
                     limits_.max_prompt_tokens));
  }
  response->mutable_token_ids()->Add(ids.begin(), ids.end());
  for (int32_t id : ids) {
    // proto3 strings must be valid UTF-8 or clients refuse the message, so a
    // piece holding part of a character shows U+FFFD for the missing part.
    response->add_pieces(tokenizer.TokenBytes(id));
  }
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* TextGenerationService::GetModelInfo(
    grpc::CallbackServerContext* context,
    const v1::GetModelInfoRequest* /*request*/, v1::ModelInfo* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::StatusOr<std::string> tenant = Authorize(*context); !tenant.ok()) {
    reactor->Finish(ToGrpcStatus(tenant.status()));
    return reactor;
  }
  const ModelSummary& summary = engine_.summary();
  const EngineOptions& options = engine_.options();
  response->set_name(summary.name);
  for (const std::string& kind : summary.layer_kinds) {
    response->add_layer_kinds(kind);
  }
  response->set_vocab_size(vocabulary_.rules.vocab_limit);
  response->set_eos_token_id(summary.eos_token_id);
  response->set_max_slots(options.max_slots);
  response->set_max_queue(options.max_queue);
  response->set_max_new_tokens_limit(
      static_cast<uint32_t>(std::max(limits_.max_new_tokens_limit, 0)));
  response->set_max_prompt_tokens(
      static_cast<uint32_t>(std::max(limits_.max_prompt_tokens, 0)));
  response->set_backend(summary.backend);
  response->set_state_bytes_per_slot(summary.state_bytes_per_slot);
  response->set_prefix_cache_bytes(options.prefix_cache_bytes);
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace seqboat
