// The OpenAI-compatible HTTP front end: POST /v1/completions and POST
// /v1/chat/completions (streaming as server-sent events, or one JSON body),
// GET /v1/models, GET /v1/models/{id} and GET /health, on a port of its own,
// into the same engine and the same metrics as the gRPC service. A chat
// request's messages go through the model's chat template; the prompt is
// tokenized with the template's special tokens, never the client's.
//
// Served by libmicrohttpd from a small pool of event-loop threads. A request
// is parsed (openai_request), validated (request_validation, as for gRPC) and
// submitted on one of them; the engine's sink only appends the event to the
// call and resumes its connection, so a slow reader never holds the engine
// thread: its events pile up and go out as one larger chunk. A connection
// that waits on the engine is suspended (it costs a socket, not a thread)
// and a watcher polls those sockets, so a client that goes away cancels its
// request (RequestControl::cancelled) even before its first token. Bodies
// are bounded (413 beyond the limit; a Content-Length over it is refused
// unread) and idle connections are closed. With API keys, every path but
// /health first checks `Authorization: Bearer KEY` and answers 401
// (invalid_api_key) before reading any body. HTTPS when given credentials.
#ifndef SEQBOAT_SERVER_OPENAI_SERVER_H_
#define SEQBOAT_SERVER_OPENAI_SERVER_H_

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/random/random.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "server/api_keys.h"
#include "server/chat_template.h"
#include "server/https_credentials.h"
#include "server/request_validation.h"
#include "server/serving_metrics.h"
#include "server/tenant_quotas.h"
#include "server/tool_call_parser.h"

struct MHD_Daemon;

namespace seqboat {

class OpenAiServer {
 public:
  struct Options {
    std::string host;
    int port = 0;  // 0 picks a free one
    // What /v1/models lists and a request's "model" must name.
    std::string model_id;
    ValidationLimits limits;  // the gRPC service's
    size_t max_body_bytes = 1 << 20;
    int threads = 4;  // event loops; tokenizing a prompt runs on them
    // A connection silent this long (no request, or a reader that stopped
    // reading) is closed; one waiting on the engine is not silent.
    absl::Duration idle_timeout = absl::Seconds(30);
    // How often waiting connections are checked for a client gone away.
    absl::Duration disconnect_poll = absl::Milliseconds(100);
    // /health answers 200 while this is true, 503 otherwise (draining).
    std::function<bool()> ready;
    ServingMetrics* metrics = nullptr;  // must outlive the engine's events
    // The model's chat template. Without one, chat requests answer 400
    // saying why: `no_chat_template` completes "The model has no usable
    // chat template: ...".
    std::shared_ptr<const ChatTemplate> chat_template;
    std::string no_chat_template = "none was given";
    // How tool_choice auto reads tool calls from the output; none: a chat
    // request with tools and tool_choice auto is refused (400), as vLLM
    // refuses it without --tool-call-parser.
    std::optional<ToolCallFormat> tool_call_parser;
    // Null: no keys asked for. Must outlive the server. Its tenants each
    // have their own part of the prefix cache unless `share_prefix_cache`.
    const ApiKeyStore* api_keys = nullptr;
    bool share_prefix_cache = false;
    // Null: no quotas. Over one, a call is answered 429 with Retry-After.
    // Must outlive the engine's last event.
    TenantQuotas* quotas = nullptr;
    // Null: plain HTTP. Else HTTPS with these; must outlive the server.
    HttpsCredentials* tls = nullptr;
  };

  // Binds and starts serving. `engine` must outlive the server.
  static absl::StatusOr<std::unique_ptr<OpenAiServer>> Start(Engine* engine,
                                                             Options options);
  // Closes every connection (the requests of calls still running are
  // cancelled) and joins the threads.
  ~OpenAiServer();

  int port() const { return port_; }
  // Completion calls whose response has not ended.
  int active_calls() const { return active_calls_.load(); }

  struct Call;

 private:
  OpenAiServer(Engine* engine, Options options);

  // Registered calls (those submitted to the engine), for the disconnect
  // watcher and for shutdown.
  void Register(const std::shared_ptr<Call>& call);
  void Unregister(const Call* call);
  void WatchDisconnects();
  uint64_t NextRandom();

  friend struct Handlers;

  Engine& engine_;
  const Options options_;
  const Vocabulary vocabulary_;
  const int64_t created_;  // Unix seconds, /v1/models' "created"
  // Chat requests also stop at the template's eos_token ("<|im_end|>",
  // "<|eot_id|>"), the end of a turn, when it is one special token.
  std::vector<int32_t> chat_stop_ids_;
  MHD_Daemon* daemon_ = nullptr;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> active_calls_{0};

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::shared_ptr<Call>> calls_ ABSL_GUARDED_BY(mu_);
  std::thread watcher_;
  absl::Mutex rng_mu_;
  absl::BitGen rng_ ABSL_GUARDED_BY(rng_mu_);
};

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_SERVER_H_
