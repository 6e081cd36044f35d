// seqboat_server: loads a model, serves seqboat.v1.TextGeneration over gRPC
// (with health checking and reflection), and drains gracefully on SIGTERM or
// SIGINT. Serves /metrics, /healthz and /readyz on --http_port, and the
// OpenAI-compatible API on --openai_port. Prints "http listening on
// HOST:PORT", then "openai listening on HOST:PORT", then "listening on
// HOST:PORT" (gRPC) on stdout once it accepts calls; logs go to stderr.
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/status_macros.h"
#include "engine/engine.h"
#include "engine/model_dir/model_dir.h"
#include "server/api_keys.h"
#include "server/backend_choice.h"
#include "server/chat_template.h"
#include "server/engine_flags.h"
#include "server/engine_gauges.h"
#include "server/grpc_tls.h"
#include "server/http_endpoint.h"
#include "server/https_credentials.h"
#include "server/idle_trim.h"
#include "server/jinja/template.h"
#include "server/metrics.h"
#include "server/openai_server.h"
#include "server/peer_flags.h"
#include "server/request_validation.h"
#include "server/secret_files.h"
#include "server/serving_metrics.h"
#include "server/tenant_quotas.h"
#include "server/text_generation_service.h"
#include "server/tool_call_parser.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, model_dir, "",
          "Directory with config.json, model.safetensors and tokenizer.json.");
ABSL_FLAG(std::string, host, "0.0.0.0", "Address to listen on.");
ABSL_FLAG(int32_t, port, 50051, "Port to listen on; 0 picks a free one.");
ABSL_FLAG(int32_t, http_port, -1,
          "HTTP port for /metrics, /healthz and /readyz (same host as "
          "--host); 0 picks a free one, -1 (default) turns it off; "
          "deploy/entrypoint.sh passes 8080.");
ABSL_FLAG(int32_t, openai_port, -1,
          "HTTP port of the OpenAI-compatible API (/v1/completions, "
          "/v1/models, /health; same host as --host); 0 picks a free one, "
          "-1 (default) turns it off; deploy/entrypoint.sh passes 8000.");
ABSL_FLAG(std::string, tool_call_parser, "",
          "How chat tool calls are read from the output under tool_choice "
          "auto, as vLLM's --tool-call-parser: hermes (Qwen's <tool_call> "
          "markers) or llama3_json (Llama 3's JSON); empty (default): "
          "tool_choice auto with tools is refused (400), required and named "
          "functions work regardless.");
ABSL_FLAG(std::string, served_model_name, "",
          "The model id the OpenAI API lists and requests must name; default "
          "config.json's name, else the model directory's name.");
ABSL_FLAG(std::string, backend, "auto",
          "Compute backend: cpu, cuda, or auto (CUDA when a GPU is present).");
ABSL_FLAG(int32_t, cuda_device, 0, "CUDA device ordinal.");
ABSL_FLAG(std::string, cuda_weights, "bf16",
          "Weight storage on the GPU: bf16, fp16, fp32, or fp8 (e4m3 with "
          "one scale per output row: half bf16's memory and bytes read per "
          "decode step; Ada/Hopper only, refused on older devices; logit "
          "error bounded as the CPU's int8).");
ABSL_FLAG(bool, cuda_graphs, true,
          "Record decode steps as CUDA graphs per batch bucket.");
ABSL_FLAG(bool, cuda_pipeline, true,
          "Launch each step before reading the last one's tokens, so the "
          "host's work between steps overlaps the device's.");
ABSL_FLAG(bool, cuda_early_launch, true,
          "Launch each kernel as a programmatic dependent of the kernel "
          "before it (Hopper), so that it starts while that one finishes; "
          "the small-batch GEMVs stream their weights into L2 meanwhile.");
ABSL_FLAG(int32_t, cpu_threads, 0, "CPU backend threads; 0 = one per core.");
ABSL_FLAG(std::string, cpu_weights, "auto",
          "How the CPU backend keeps matrices: fp32, bf16, fp16, int8 "
          "(weight-only, per-row scales), or auto (what the model file "
          "stores). Routers stay fp32.");
ABSL_FLAG(std::string, cpu_isa, "auto",
          "CPU kernel instruction set: auto (the widest the processor "
          "runs), avx2 or avx512.");
ABSL_FLAG(int32_t, drain_grace_seconds, 30,
          "On SIGTERM, how long running requests may take to finish before "
          "they are cancelled.");
ABSL_FLAG(std::string, api_keys_file, "",
          "Require an API key on both APIs: a file of one key per line, or "
          "KEY TENANT [max_sequences=N tokens_per_second=T ...: the "
          "tenant's own quotas] ('#' comments); reread on SIGHUP.");
ABSL_FLAG(std::string, metrics_api_key_file, "",
          "Require a key (a keys file as --api_keys_file's) for /metrics on "
          "--http_port; the probes stay open. Empty (default): open.");
ABSL_FLAG(bool, share_prefix_cache_across_tenants, false,
          "With --api_keys_file, let every tenant resume from every other's "
          "prefix-cache snapshots (cache_salt still partitions); by default "
          "each tenant's are its own.");
ABSL_FLAG(int32_t, tenant_max_sequences, 0,
          "Sequences one tenant (an API key's; without keys, all requests "
          "are one) may have running or queued; more are refused "
          "RESOURCE_EXHAUSTED / 429. 0 (default): no bound.");
ABSL_FLAG(double, tenant_requests_per_second, 0,
          "Generation requests per second one tenant may start (a token "
          "bucket of --tenant_request_burst); past it RESOURCE_EXHAUSTED / "
          "429 with the wait. 0 (default): no bound.");
ABSL_FLAG(double, tenant_request_burst, 0,
          "The request bucket's size; 0: the rate (at least 1).");
ABSL_FLAG(double, tenant_tokens_per_second, 0,
          "Prompt plus generated tokens per second one tenant may use (a "
          "token bucket of --tenant_token_burst: a request starts while it "
          "holds a token, the prompt is taken then and the output as it "
          "streams); past it RESOURCE_EXHAUSTED / 429. 0 (default): none.");
ABSL_FLAG(double, tenant_token_burst, 0,
          "The token bucket's size; 0: the rate (at least 1).");
ABSL_FLAG(std::string, tls_cert_file, "",
          "Serve all three ports over TLS with this PEM certificate chain "
          "(with --tls_key_file). Empty (default): plaintext.");
ABSL_FLAG(std::string, tls_key_file, "", "The PEM key of --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "Mutual TLS: require a client certificate signed by one of the "
          "CAs in this PEM file on all three ports. Empty (default): none.");
ABSL_FLAG(bool, tls_http_port_client_certs, true,
          "With --tls_client_ca_file: whether --http_port (metrics and "
          "probes) wants client certificates too; false lets kubelet's HTTPS "
          "probes in (they present none; /metrics can take a key).");
ABSL_FLAG(int32_t, tls_refresh_seconds, 60,
          "How often the gRPC port rereads the TLS files (the HTTP ports "
          "reread them on SIGHUP).");
ABSL_FLAG(std::string, log_level, "info",
          "trace, debug, info, warn, error or critical (debug logs one line "
          "per request).");

namespace seqboat {
namespace {

constexpr char kServiceName[] = "seqboat.v1.TextGeneration";

// The requests' default speculation, and the batch it runs up to (the
// engine's, measured at start-up for auto).
absl::Status CheckFlags() {
  RETURN_IF_ERROR(CheckEngineFlags());
  RETURN_IF_ERROR(CheckPeerFlags());
  if (absl::GetFlag(FLAGS_model_dir).empty()) {
    return absl::InvalidArgumentError("--model_dir is required");
  }
  const int32_t port = absl::GetFlag(FLAGS_port);
  if (port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("--port must be in [0, 65535], got ", port));
  }
  const int32_t http_port = absl::GetFlag(FLAGS_http_port);
  if (http_port < -1 || http_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--http_port must be -1 or in [0, 65535], got ", http_port));
  }
  const int32_t openai_port = absl::GetFlag(FLAGS_openai_port);
  if (openai_port < -1 || openai_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--openai_port must be -1 or in [0, 65535], got ", openai_port));
  }
  if (absl::GetFlag(FLAGS_drain_grace_seconds) < 0) {
    return absl::InvalidArgumentError("--drain_grace_seconds must be >= 0");
  }
  for (const auto& [name, value] :
       {std::pair<absl::string_view, double>{
            "tenant_requests_per_second",
            absl::GetFlag(FLAGS_tenant_requests_per_second)},
        {"tenant_request_burst", absl::GetFlag(FLAGS_tenant_request_burst)},
        {"tenant_tokens_per_second",
         absl::GetFlag(FLAGS_tenant_tokens_per_second)},
        {"tenant_token_burst", absl::GetFlag(FLAGS_tenant_token_burst)}}) {
    if (!(value >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " must be >= 0, got ", value));
    }
  }
  if (absl::GetFlag(FLAGS_tls_cert_file).empty() !=
          absl::GetFlag(FLAGS_tls_key_file).empty() ||
      (absl::GetFlag(FLAGS_tls_cert_file).empty() &&
       !absl::GetFlag(FLAGS_tls_client_ca_file).empty())) {
    return absl::InvalidArgumentError(
        "--tls_cert_file and --tls_key_file go together, and "
        "--tls_client_ca_file needs them");
  }
  if (absl::GetFlag(FLAGS_tls_refresh_seconds) < 1) {
    return absl::InvalidArgumentError("--tls_refresh_seconds must be >= 1");
  }
  return absl::OkStatus();
}

absl::Status SetUpLogging() {
  auto logger = spdlog::stderr_color_mt("seqboat");
  spdlog::set_default_logger(logger);
  const std::string level = absl::GetFlag(FLAGS_log_level);
  for (const char* name :
       {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
    if (level == name) {
      spdlog::set_level(spdlog::level::from_str(level));
      return absl::OkStatus();
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--log_level: unknown level '", level, "'"));
}

std::string HostPort(const std::string& host, int port) {
  // IPv6 literals need brackets in a gRPC address.
  if (absl::StrContains(host, ':') && !absl::StartsWith(host, "[")) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

// Waits for SIGTERM or SIGINT (blocked in every thread, see
// BlockShutdownSignals) for at most `timeout`; returns the signal or 0.
int WaitForSignal(const sigset_t& signals, absl::Duration timeout) {
  timespec ts = absl::ToTimespec(timeout);
  int sig = sigtimedwait(&signals, nullptr, &ts);
  return sig > 0 ? sig : 0;
}

// Stops taking work, lets running requests finish for up to the grace
// period (a second signal cuts it short), then cancels what is left; the
// engine's Shutdown writes the prefix snapshots in memory to the disk tier
// (--prefix_cache_dir), so a restarted replica finds its conversations.
void Drain(Engine& engine, const TextGenerationService& service,
           const OpenAiServer* openai, grpc::Server& server,
           const sigset_t& signals, std::atomic<bool>& ready) {
  ready.store(false);
  server.GetHealthCheckService()->SetServingStatus(false);
  server.GetHealthCheckService()->SetServingStatus(kServiceName, false);
  engine.BeginDrain();
  const absl::Time grace_end =
      absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_drain_grace_seconds));
  while (true) {
    EngineStats stats = engine.Stats();
    if (stats.running == 0 && stats.waiting == 0) {
      spdlog::info("drained: no requests left");
      break;
    }
    if (absl::Now() >= grace_end) {
      spdlog::warn("grace period over: cancelling {} running and {} waiting",
                   stats.running, stats.waiting);
      break;
    }
    if (WaitForSignal(signals, absl::Milliseconds(50)) != 0) {
      spdlog::warn("second signal: cancelling {} running and {} waiting",
                   stats.running, stats.waiting);
      break;
    }
  }
  // Every remaining stream gets a CANCELLED finish from the engine; give
  // those last messages a moment to go out (a client that stopped reading
  // would hold its stream open forever).
  engine.Shutdown();
  auto unsent = [&] {
    return service.active_streams() +
           (openai != nullptr ? openai->active_calls() : 0);
  };
  const absl::Time flush_end = absl::Now() + absl::Seconds(5);
  while (unsent() > 0 && absl::Now() < flush_end) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  if (unsent() > 0) {
    spdlog::warn("{} streams did not finish sending; cancelling them",
                 unsent());
  }
  // No deadline to wait for: gRPC would otherwise sit out the whole deadline
  // whenever a client still holds an idle connection open.
  server.Shutdown(std::chrono::system_clock::now());
}

// Blocks the shutdown signals before any thread starts, so that threads
// inherit the mask and the signals wait in the queue for sigtimedwait: no
// handler and no global state needed.
// SIGHUP (reread the keys files) is blocked too, but waited for only while
// serving: during a drain it stays queued.
sigset_t BlockShutdownSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigset_t with_hangup = signals;
  sigaddset(&with_hangup, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &with_hangup, nullptr);
  return signals;
}

TlsFiles TlsFilesFromFlags() {
  return {absl::GetFlag(FLAGS_tls_cert_file), absl::GetFlag(FLAGS_tls_key_file),
          absl::GetFlag(FLAGS_tls_client_ca_file)};
}

// /metrics, /healthz and /readyz on --http_port (null when it is -1). Up
// before the model loads, so liveness probes pass during a long load.
absl::StatusOr<std::unique_ptr<HttpEndpoint>> StartHttpSidePort(
    MetricsRegistry& registry, const std::atomic<bool>& ready,
    const ApiKeyStore* metrics_keys, HttpsCredentials* tls) {
  if (absl::GetFlag(FLAGS_http_port) < 0) return nullptr;
  HttpEndpoint::Handlers handlers;
  handlers.metrics = [&registry] { return registry.Render(); };
  handlers.ready = [&ready] { return ready.load(); };
  if (metrics_keys != nullptr) {
    handlers.authorize_metrics = [metrics_keys](const char* authorization) {
      return metrics_keys->Authorize(authorization).has_value();
    };
  }
  ASSIGN_OR_RETURN(
      std::unique_ptr<HttpEndpoint> http,
      HttpEndpoint::Start(absl::GetFlag(FLAGS_host),
                          absl::GetFlag(FLAGS_http_port), handlers, tls));
  // Printed before the gRPC line, which tells callers startup is done.
  std::cout << "http listening on "
            << HostPort(absl::GetFlag(FLAGS_host), http->port()) << std::endl;
  return http;
}

// The backend of the flags; --cpu_weights=auto keeps the matrix type the
// model stores.
absl::StatusOr<std::unique_ptr<Backend>> BuildBackend(const ModelDir& model) {
  BackendChoice choice;
  choice.name = absl::GetFlag(FLAGS_backend);
  choice.cuda_device = absl::GetFlag(FLAGS_cuda_device);
  choice.cuda_weights = absl::GetFlag(FLAGS_cuda_weights);
  choice.cuda_graphs = absl::GetFlag(FLAGS_cuda_graphs);
  choice.cuda_pipeline = absl::GetFlag(FLAGS_cuda_pipeline);
  choice.cuda_early_launch = absl::GetFlag(FLAGS_cuda_early_launch);
  choice.cpu_threads = absl::GetFlag(FLAGS_cpu_threads);
  choice.cpu_weights = absl::GetFlag(FLAGS_cpu_weights);
  choice.cpu_isa = absl::GetFlag(FLAGS_cpu_isa);
  // Without an embedding the model load says what is missing.
  if (absl::StatusOr<std::string> stored = model.StoredMatrixType();
      stored.ok()) {
    choice.stored_weights = *std::move(stored);
  }
  return ChooseBackend(choice);
}

struct GrpcServer {
  std::unique_ptr<SnapshotExchangeService> exchange;  // outlives the server
  std::unique_ptr<grpc::Server> server;
  int port = 0;
};

// `service` and the snapshot exchange between replicas over gRPC on
// --host:--port, with health checking (not serving until Run says so) and
// reflection.
absl::StatusOr<GrpcServer> StartGrpcServer(TextGenerationService* service,
                                           Engine* engine,
                                           const ApiKeyStore* api_keys) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  const std::string address =
      HostPort(absl::GetFlag(FLAGS_host), absl::GetFlag(FLAGS_port));
  ASSIGN_OR_RETURN(
      std::shared_ptr<grpc::ServerCredentials> credentials,
      GrpcServerCredentials(TlsFilesFromFlags(),
                            absl::GetFlag(FLAGS_tls_refresh_seconds)));
  GrpcServer started;
  ASSIGN_OR_RETURN(started.exchange,
                   SnapshotExchangeFromFlags(
                       engine, api_keys, engine->options().max_prompt_tokens));
  builder.AddListeningPort(address, credentials, &started.port);
  builder.RegisterService(service);
  builder.RegisterService(started.exchange.get());
  started.server = builder.BuildAndStart();
  if (started.server == nullptr || started.port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  return started;
}

// The id /v1/models lists: --served_model_name, else config.json's name,
// else the model directory's.
std::string OpenAiModelId(const ModelSummary& summary,
                          const std::string& model_dir) {
  std::string id = absl::GetFlag(FLAGS_served_model_name);
  if (id.empty()) id = summary.name;
  if (id.empty()) {
    std::filesystem::path dir =
        std::filesystem::path(model_dir).lexically_normal();
    if (!dir.has_filename()) dir = dir.parent_path();  // "models/x/"
    id = dir.filename().string();
  }
  return id;
}

// The model's chat template into `o`, or why chat requests are refused.
void LoadChatTemplate(const ModelDir& model_dir, const ValidationLimits& limits,
                      OpenAiServer::Options* o) {
  // The template may render a prompt as long as the prompt limit.
  jinja::Limits template_limits;
  template_limits.max_output_bytes =
      static_cast<size_t>(limits.max_prompt_bytes);
  template_limits.max_work_bytes = std::max(
      template_limits.max_work_bytes, 16 * template_limits.max_output_bytes);
  absl::StatusOr<std::unique_ptr<ChatTemplate>> chat_template =
      ChatTemplate::FromModelDir(model_dir, template_limits);
  if (chat_template.ok()) {
    o->chat_template = *std::move(chat_template);
  } else if (chat_template.status().code() == absl::StatusCode::kNotFound) {
    spdlog::info("no chat template ({}): /v1/chat/completions answers 400",
                 std::string(chat_template.status().message()));
    o->no_chat_template = "its tokenizer_config.json has no chat_template";
  } else {
    spdlog::warn(
        "the chat template cannot be used, /v1/chat/completions "
        "answers 400: {}",
        std::string(chat_template.status().message()));
    o->no_chat_template =
        "its chat template does not parse (the server's log says where)";
  }
}

// The OpenAI-compatible API on --openai_port (null when it is -1).
absl::StatusOr<std::unique_ptr<OpenAiServer>> StartOpenAiPort(
    Engine* engine, const ValidationLimits& limits, const ModelDir& model_dir,
    ServingMetrics* metrics, const std::atomic<bool>& ready,
    const ApiKeyStore* api_keys, TenantQuotas* quotas, HttpsCredentials* tls) {
  if (absl::GetFlag(FLAGS_openai_port) < 0) return nullptr;
  OpenAiServer::Options o;
  o.host = absl::GetFlag(FLAGS_host);
  o.port = absl::GetFlag(FLAGS_openai_port);
  o.model_id = OpenAiModelId(engine->summary(), model_dir.path());
  o.limits = limits;
  // JSON escapes can make a prompt's text several times longer.
  o.max_body_bytes =
      4 * static_cast<size_t>(limits.max_prompt_bytes) + (size_t{64} << 10);
  o.ready = [&ready] { return ready.load(); };
  o.metrics = metrics;
  o.api_keys = api_keys;
  o.share_prefix_cache = absl::GetFlag(FLAGS_share_prefix_cache_across_tenants);
  o.quotas = quotas->enabled() ? quotas : nullptr;
  o.tls = tls;
  LoadChatTemplate(model_dir, limits, &o);
  if (const std::string parser = absl::GetFlag(FLAGS_tool_call_parser);
      !parser.empty()) {
    absl::StatusOr<ToolCallFormat> format = ToolCallFormatByName(parser);
    if (!format.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--tool_call_parser: ", format.status().message()));
    }
    o.tool_call_parser = *format;
  }
  ASSIGN_OR_RETURN(std::unique_ptr<OpenAiServer> openai,
                   OpenAiServer::Start(engine, std::move(o)));
  std::cout << "openai listening on "
            << HostPort(absl::GetFlag(FLAGS_host), openai->port()) << std::endl;
  return openai;
}

// Serves until SIGTERM or SIGINT (returns the signal) or until the device is
// lost (returns 0 with *fault set): the engine then refuses all work, so the
// replica leaves the load balancer and exits non-zero for its supervisor to
// restart it, rather than failing every request while looking healthy.
// Returns freed heap to the system once nothing is running, so RSS comes
// back near its baseline after a burst.
int ServeUntilSignalOrFault(const sigset_t& signals, Engine& engine,
                            const TextGenerationService& service,
                            const OpenAiServer* openai,
                            const Reloadable& reloadable, std::string* fault) {
  IdleTrimmer trimmer;
  sigset_t with_hangup = signals;
  sigaddset(&with_hangup, SIGHUP);
  int sig = 0;
  while (sig == 0 && fault->empty()) {
    sig = WaitForSignal(with_hangup, absl::Seconds(1));
    if (sig == SIGHUP) {
      Reload(reloadable);
      sig = 0;
    }
    const EngineStats stats = engine.Stats();
    *fault = stats.fault;
    const bool idle = stats.running == 0 && stats.waiting == 0 &&
                      service.active_streams() == 0 &&
                      (openai == nullptr || openai->active_calls() == 0);
    if (trimmer.Poll(idle)) {
      spdlog::debug("idle: returned freed memory, RSS now {} MiB",
                    ResidentBytes() >> 20);
    }
  }
  return sig;
}

int Run() {
  absl::Status start = CheckFlags();
  if (start.ok()) start = SetUpLogging();
  if (!start.ok()) {
    std::cerr << "seqboat_server: " << start.message() << "\n";
    return 1;
  }
  const sigset_t signals = BlockShutdownSignals();

  // Metrics exist before the engine so its observers can record into them,
  // and outlive it (the engine thread calls them until Shutdown); so do the
  // quotas (below, after the keys they read), whose sinks the engine calls.
  MetricsRegistry registry;
  ServingMetrics metrics(&registry);
  // /readyz: true between "listening" and the start of a drain.
  std::atomic<bool> ready{false};
  absl::StatusOr<std::unique_ptr<ApiKeyStore>> api_keys =
      OpenKeys(absl::GetFlag(FLAGS_api_keys_file));
  absl::StatusOr<std::unique_ptr<ApiKeyStore>> metrics_keys =
      OpenKeys(absl::GetFlag(FLAGS_metrics_api_key_file));
  for (const auto* keys : {&api_keys, &metrics_keys}) {
    if (!keys->ok()) {
      spdlog::error("{}", keys->status().ToString());
      return 1;
    }
  }
  // A tenant's quotas: the flags', but what its lines in the keys file set.
  const TenantLimits tenant_limits{
      absl::GetFlag(FLAGS_tenant_max_sequences),
      absl::GetFlag(FLAGS_tenant_requests_per_second),
      absl::GetFlag(FLAGS_tenant_request_burst),
      absl::GetFlag(FLAGS_tenant_tokens_per_second),
      absl::GetFlag(FLAGS_tenant_token_burst)};
  TenantQuotas::LimitsOf limits_of;
  if (const ApiKeyStore* keys = api_keys->get(); keys != nullptr) {
    limits_of = [keys, tenant_limits](const std::string& tenant) {
      return WithOverrides(tenant_limits, keys->QuotasOf(tenant));
    };
  }
  TenantQuotas quotas(tenant_limits, std::move(limits_of));
  absl::StatusOr<HttpsPorts> tls = OpenTls(
      TlsFilesFromFlags(), absl::GetFlag(FLAGS_tls_http_port_client_certs));
  if (!tls.ok()) {
    spdlog::error("{}", tls.status().ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<HttpEndpoint>> http =
      StartHttpSidePort(registry, ready, metrics_keys->get(), tls->side());
  if (!http.ok()) {
    spdlog::error("{}", http.status().ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<ModelDir>> model_dir =
      ModelDir::Open(absl::GetFlag(FLAGS_model_dir));
  if (!model_dir.ok()) {
    spdlog::error("cannot load model from {}: {}",
                  absl::GetFlag(FLAGS_model_dir),
                  model_dir.status().ToString());
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Backend>> backend = BuildBackend(**model_dir);
  if (!backend.ok()) {
    spdlog::error("backend {}: {}", absl::GetFlag(FLAGS_backend),
                  backend.status().ToString());
    return 1;
  }
  const EngineOptions options =
      EngineOptionsFromFlags(absl::GetFlag(FLAGS_model_dir), metrics);
  absl::StatusOr<SpeculativeParams> speculative = SpeculativeDefault(options);
  if (!speculative.ok()) {
    spdlog::error("{}", std::string(speculative.status().message()));
    return 1;
  }
  absl::StatusOr<std::unique_ptr<Engine>> engine =
      Engine::Create(options, *std::move(backend), **model_dir);
  if (!engine.ok()) {
    spdlog::error("cannot load model from {}: {}", options.model_dir,
                  engine.status().ToString());
    return 1;
  }

  ValidationLimits limits = LimitsFromFlags(options);
  limits.speculative_default = *speculative;
  const Engine& served = **engine;  // its options as auto resolved them
  if (absl::Status s =
          LimitsForModel(served.summary(), served.options(), limits);
      !s.ok()) {
    spdlog::error("{}", std::string(s.message()));
    (*engine)->Shutdown();
    return 1;
  }
  TextGenerationService service(
      engine->get(), limits, &metrics, api_keys->get(),
      absl::GetFlag(FLAGS_share_prefix_cache_across_tenants),
      quotas.enabled() ? &quotas : nullptr);
  auto grpc_server = StartGrpcServer(&service, engine->get(), api_keys->get());
  if (!grpc_server.ok()) {
    spdlog::error("{}", grpc_server.status().ToString());
    (*engine)->Shutdown();
    return 1;
  }
  grpc::Server& server = *grpc_server->server;
  absl::StatusOr<std::unique_ptr<OpenAiServer>> openai =
      StartOpenAiPort(engine->get(), limits, **model_dir, &metrics, ready,
                      api_keys->get(), &quotas, tls->api.get());
  if (!openai.ok()) {
    spdlog::error("{}", openai.status().ToString());
    server.Shutdown(std::chrono::system_clock::now());
    (*engine)->Shutdown();
    return 1;
  }
  server.GetHealthCheckService()->SetServingStatus(true);
  server.GetHealthCheckService()->SetServingStatus(kServiceName, true);
  AddEngineGauges(&registry, engine->get());
  ready.store(true);

  const ModelSummary& summary = (*engine)->summary();
  spdlog::info(
      "serving model '{}' ({} layers, vocab {}) on backend {} with {} slots "
      "of {} state bytes each, queue {}, prefix cache {} bytes, port {}",
      summary.name, summary.layer_kinds.size(), summary.vocab_size,
      summary.backend, options.max_slots, summary.state_bytes_per_slot,
      options.max_queue, options.prefix_cache_bytes, grpc_server->port);
  std::cout << "listening on "
            << HostPort(absl::GetFlag(FLAGS_host), grpc_server->port)
            << std::endl;

  std::string fault;
  const int sig = ServeUntilSignalOrFault(
      signals, **engine, service, openai->get(),
      {{api_keys->get(), metrics_keys->get()},
       {tls->api.get(), tls->side_without_client_certs.get()},
       absl::GetFlag(FLAGS_tls_refresh_seconds)},
      &fault);
  if (sig != 0) {
    spdlog::info("signal {}: draining for up to {} s", sig,
                 absl::GetFlag(FLAGS_drain_grace_seconds));
  } else {
    spdlog::critical("device lost, stopping: {}", fault);
  }
  Drain(**engine, service, openai->get(), server, signals, ready);
  // After the engine's last event, as OpenAiServer requires.
  openai->reset();
  // The gauges read the engine: the HTTP side goes before it does.
  http->reset();
  spdlog::info("stopped");
  return sig != 0 ? 0 : 1;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Serves a sequence model over gRPC.\n"
      "  seqboat_server --model_dir=DIR [--port=50051] [--max_slots=64] ...");
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run();
}
