#include "server/openai_server.h"

#include <microhttpd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "server/http_endpoint.h"
#include "server/mhd_response.h"
#include "server/openai_chat_prompt.h"
#include "server/openai_error.h"
#include "server/openai_request.h"
#include "server/openai_response.h"
#include "server/session_key.h"
#include "spdlog/spdlog.h"

namespace seqboat {

// One POST /v1/completions or /v1/chat/completions. Shared by the MHD
// callbacks (through a CallHandle), the sink and the disconnect watcher.
struct OpenAiServer::Call {
  Call(OpenAiServer* s, MHD_Connection* c)
      : server(s), metrics(s->options_.metrics), connection(c) {
    timeline.frontend = Frontend::kHttp;
    timeline.start = absl::Now();
  }

  OpenAiServer* const server;  // only while MHD holds the call
  // The sink may outlive the server; the metrics outlive the engine.
  ServingMetrics* const metrics;
  const std::shared_ptr<RequestControl> control =
      std::make_shared<RequestControl>();

  // Touched by the connection's MHD thread only.
  std::string body;
  std::string tenant;    // its key's ("" without keys)
  size_t discarded = 0;  // bytes past max_body_bytes
  bool started = false;  // the body was complete and handled
  bool submitted = false;
  bool stream = false;
  int sent_status = 0;              // the HTTP status queued, 0 before one
  bool chat = false;                // /v1/chat/completions, not /v1/completions
  std::optional<std::string> user;  // the body's `user`
  std::string constraint_param;     // what errors of its constraint name
  std::string session;  // the conversation key returned (session_key.h)
  // The renderer of the call's endpoint.
  std::unique_ptr<ChoicesRenderer> renderer;
  std::string out;  // SSE bytes being handed to MHD
  size_t out_pos = 0;
  bool stream_done = false;  // [DONE] is in `out` or sent
  int fd = -1;

  absl::Mutex mu;
  // Null once the request is over for MHD (OnCompleted).
  MHD_Connection* connection ABSL_GUARDED_BY(mu);
  // MHD_suspend_connection ran and nothing resumed it yet: a resume is owed
  // exactly when this is true, and only whoever clears it may resume.
  bool suspended ABSL_GUARDED_BY(mu) = false;
  std::vector<GenerationEvent> pending ABSL_GUARDED_BY(mu);
  int32_t n ABSL_GUARDED_BY(mu) = 1;  // the request's sequences
  int32_t finals ABSL_GUARDED_BY(mu) = 0;
  // Every sequence's final event (or an error) arrived.
  bool engine_done ABSL_GUARDED_BY(mu) = false;
  bool closing ABSL_GUARDED_BY(mu) = false;  // the server is stopping
  RequestTimeline timeline ABSL_GUARDED_BY(mu);
};

namespace {

using Call = OpenAiServer::Call;

// What MHD keeps in a request's req_cls and in a streaming response's
// callback: a reference to the call.
struct CallHandle {
  std::shared_ptr<Call> call;
};

constexpr size_t kConnectionMemoryBytes = 64 * 1024;
constexpr size_t kStreamBlockBytes = 16 * 1024;
constexpr unsigned kMaxConnections = 4096;

// 401 as OpenAI words it, naming nothing of what was sent.
MHD_Result RespondUnauthorized(MHD_Connection* connection) {
  return RespondError(
      connection,
      HttpError(401,
                "Missing or incorrect API key: send it as `Authorization: "
                "Bearer KEY`.",
                "invalid_request_error", "invalid_api_key"),
      {{MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer"}});
}

bool IsGet(const char* method) {
  return std::strcmp(method, MHD_HTTP_METHOD_GET) == 0 ||
         std::strcmp(method, MHD_HTTP_METHOD_HEAD) == 0;
}

}  // namespace

// The libmicrohttpd callbacks, with access to the server's internals.
struct Handlers {
  static MHD_Result Access(void* cls, MHD_Connection* connection,
                           const char* url, const char* method,
                           const char* /*version*/, const char* upload_data,
                           size_t* upload_data_size, void** req_cls);
  static void Completed(void* cls, MHD_Connection* connection, void** req_cls,
                        MHD_RequestTerminationCode toe);
  static ssize_t ReadStream(void* cls, uint64_t pos, char* buf, size_t max);
  static void FreeStream(void* cls);

  static MHD_Result Route(OpenAiServer& server, MHD_Connection* connection,
                          const std::string& path, const char* method,
                          void** req_cls);
  static MHD_Result StartCompletion(OpenAiServer& server,
                                    const std::shared_ptr<Call>& call,
                                    MHD_Connection* connection);
  static MHD_Result StartChat(OpenAiServer& server,
                              const std::shared_ptr<Call>& call,
                              MHD_Connection* connection);
  // What both endpoints share once their request is validated.
  static CompletionContext Context(const OpenAiServer& server,
                                   const Request& request, bool logprobs,
                                   bool include_usage);
  static MHD_Result Submit(OpenAiServer& server,
                           const std::shared_ptr<Call>& call,
                           MHD_Connection* connection, Request request,
                           std::string stream_start);
  static MHD_Result AnswerOrWait(const std::shared_ptr<Call>& call,
                                 MHD_Connection* connection);
  static MHD_Result Answer(Call& call, MHD_Connection* connection, int status,
                           const std::string& body);
  static EventSink Sink(const std::shared_ptr<Call>& call);
};

MHD_Result Handlers::Access(void* cls, MHD_Connection* connection,
                            const char* url, const char* method,
                            const char* /*version*/, const char* upload_data,
                            size_t* upload_data_size, void** req_cls) {
  OpenAiServer& server = *static_cast<OpenAiServer*>(cls);
  auto* handle = static_cast<CallHandle*>(*req_cls);
  if (handle == nullptr) return Route(server, connection, url, method, req_cls);
  const std::shared_ptr<Call>& call = handle->call;
  if (*upload_data_size > 0) {
    // Past the limit the rest is read and dropped, so the client gets its
    // 413 rather than a reset; far past it, the connection is closed.
    const size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (call->discarded == 0 &&
        call->body.size() + n <= server.options_.max_body_bytes) {
      call->body.append(upload_data, n);
      return MHD_YES;
    }
    call->discarded += n;
    call->body.clear();
    return call->discarded > 4 * server.options_.max_body_bytes ? MHD_NO
                                                                : MHD_YES;
  }
  if (!call->started) {
    call->started = true;
    return StartCompletion(server, call, connection);
  }
  // Resumed while waiting for a non-streaming result.
  return AnswerOrWait(call, connection);
}

MHD_Result Handlers::Route(OpenAiServer& server, MHD_Connection* connection,
                           const std::string& path, const char* method,
                           void** req_cls) {
  // Answering here, before any body is read, refuses an upload unread: MHD
  // closes the connection instead of consuming it.
  std::string tenant;
  if (server.options_.api_keys != nullptr && path != "/health") {
    const char* authorization = MHD_lookup_connection_value(
        connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    std::optional<std::string> found = server.options_.api_keys->Authorize(
        authorization != nullptr ? authorization : "");
    if (!found.has_value()) return RespondUnauthorized(connection);
    tenant = *std::move(found);
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    auto call = std::make_shared<Call>(&server, connection);
    call->tenant = std::move(tenant);
    call->chat = path == "/v1/chat/completions";
    *req_cls = new CallHandle{call};
    server.active_calls_.fetch_add(1);
    if (std::strcmp(method, MHD_HTTP_METHOD_POST) != 0) {
      return Answer(*call, connection, 405,
                    ErrorBody(MethodNotAllowed(method, path, "POST")));
    }
    const char* length = MHD_lookup_connection_value(
        connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    uint64_t declared = 0;
    if (length != nullptr && absl::SimpleAtoi(length, &declared) &&
        declared > server.options_.max_body_bytes) {
      return Answer(
          *call, connection, 413,
          ErrorBody(HttpError(413,
                              absl::StrCat("the request body is ", declared,
                                           " bytes, the limit is ",
                                           server.options_.max_body_bytes),
                              "invalid_request_error", "body_too_large")));
    }
    return MHD_YES;
  }
  const std::string& model = server.options_.model_id;
  if (path == "/v1/models" || absl::StartsWith(path, "/v1/models/") ||
      path == "/health") {
    if (!IsGet(method)) {
      return RespondError(connection, MethodNotAllowed(method, path, "GET"),
                          {{MHD_HTTP_HEADER_ALLOW, "GET, HEAD"}});
    }
    if (path == "/health") {
      if (server.options_.ready && !server.options_.ready()) {
        return RespondError(
            connection,
            HttpError(503, "the server is not ready (starting or draining)",
                      "service_unavailable"));
      }
      return Respond(connection, MHD_HTTP_OK, "{\"status\":\"ok\"}", kJson);
    }
    if (path == "/v1/models") {
      return Respond(connection, MHD_HTTP_OK,
                     ModelListBody(model, server.created_), kJson);
    }
    const std::string id = path.substr(std::strlen("/v1/models/"));
    if (id != model) {
      OpenAiError e =
          HttpError(404, absl::StrCat("The model `", id, "` does not exist"),
                    "invalid_request_error", "model_not_found");
      e.param = "model";
      return RespondError(connection, e);
    }
    return Respond(connection, MHD_HTTP_OK, ModelBody(model, server.created_),
                   kJson);
  }
  return RespondError(connection, NotFound(method, path));
}

MHD_Result Handlers::Answer(Call& call, MHD_Connection* connection, int status,
                            const std::string& body) {
  call.sent_status = status;
  return Respond(
      connection, static_cast<unsigned>(status), body, kJson,
      {{status == 405 ? MHD_HTTP_HEADER_ALLOW : nullptr, "POST"},
       {call.session.empty() ? nullptr : kSessionHeader, call.session}});
}

MHD_Result Handlers::StartCompletion(OpenAiServer& server,
                                     const std::shared_ptr<Call>& call,
                                     MHD_Connection* connection) {
  const OpenAiServer::Options& options = server.options_;
  if (call->discarded > 0) {
    return Answer(
        *call, connection, 413,
        ErrorBody(HttpError(413,
                            absl::StrCat("the request body is over ",
                                         options.max_body_bytes, " bytes"),
                            "invalid_request_error", "body_too_large")));
  }
  if (call->chat) return StartChat(server, call, connection);
  CompletionRequest parsed;
  OpenAiError error;
  if (!ParseCompletionRequest(call->body, options.model_id, options.limits,
                              &parsed, &error)) {
    return Answer(*call, connection, error.http_status, ErrorBody(error));
  }
  call->user = parsed.user;
  call->body.clear();
  call->body.shrink_to_fit();
  RequestFallbacks fallbacks;
  fallbacks.request_id = absl::StrFormat("cmpl-%016x", server.NextRandom());
  fallbacks.seed = server.NextRandom();
  if (!options.share_prefix_cache) fallbacks.cache_tenant = call->tenant;
  absl::StatusOr<Request> request = RequestFromProto(
      parsed.generate, server.vocabulary_, options.limits, fallbacks);
  if (!request.ok()) {
    spdlog::debug("rejected HTTP request: {}", request.status().ToString());
    OpenAiError e = ConstraintError(ErrorFromStatus(request.status()),
                                    parsed.constraint_param);
    return Answer(*call, connection, e.http_status, ErrorBody(e));
  }
  call->constraint_param = parsed.constraint_param;
  call->renderer = std::make_unique<CompletionRenderer>(
      Context(server, *request, request->logprobs, parsed.include_usage));
  call->stream = parsed.stream;
  spdlog::debug(
      "HTTP request {} accepted: prompt_tokens={} max_new_tokens={} seed={} "
      "stream={}",
      request->id, request->prompt.size(), request->stopping.max_new_tokens,
      request->sampling.seed, call->stream);
  return Submit(server, call, connection, *std::move(request), "");
}

CompletionContext Handlers::Context(const OpenAiServer& server,
                                    const Request& request, bool logprobs,
                                    bool include_usage) {
  CompletionContext context;
  context.id = request.id;
  context.created = absl::ToUnixSeconds(absl::Now());
  context.model = server.options_.model_id;
  context.logprobs = logprobs;
  context.include_usage = include_usage;
  context.n = request.n;
  const Tokenizer& tokenizer = server.engine_.tokenizer();
  context.token_bytes = [&tokenizer](int32_t id) {
    return tokenizer.TokenBytes(id);
  };
  return context;
}

MHD_Result Handlers::Submit(OpenAiServer& server,
                            const std::shared_ptr<Call>& call,
                            MHD_Connection* connection, Request request,
                            std::string stream_start) {
  const MHD_ConnectionInfo* info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  call->fd = info != nullptr ? info->connect_fd : -1;
  {
    absl::MutexLock lock(&call->mu);
    call->n = request.n;
    call->timeline.n = request.n;
    call->timeline.tenant = call->tenant;
  }
  // The header wins over the body's `user`; neither: derived.
  const char* header =
      MHD_lookup_connection_value(connection, MHD_HEADER_KIND, kSessionHeader);
  absl::StatusOr<std::string> session = SessionKey(
      header != nullptr ? std::optional<absl::string_view>(header)
                        : std::optional<absl::string_view>(call->user),
      request.cache_scope, request.prompt);
  if (!session.ok()) {
    OpenAiError e = ErrorFromStatus(session.status());
    return Answer(*call, connection, e.http_status, ErrorBody(e));
  }
  call->session = *std::move(session);
  request.control = call->control;
  request.tenant = call->tenant;
  request.sink = Sink(call);
  request.arrival = absl::Now();
  TenantQuotas* quotas = server.options_.quotas;
  if (quotas != nullptr) {
    absl::Duration retry_after;
    if (absl::Status over = quotas->Admit(request, absl::Now(), &retry_after);
        !over.ok()) {
      call->sent_status = 429;
      return RespondError(connection, ErrorFromStatus(over),
                          {{MHD_HTTP_HEADER_RETRY_AFTER,
                            absl::StrCat(absl::ToInt64Seconds(
                                absl::Ceil(retry_after, absl::Seconds(1))))}});
    }
  }
  const int32_t n = request.n;
  server.Register(call);
  absl::Status submitted = server.engine_.Submit(std::move(request));
  if (!submitted.ok()) {
    if (quotas != nullptr) quotas->Refused(call->tenant, n);
    server.Unregister(call.get());
    // The engine compiles the constraint: its refusal names the parameter.
    OpenAiError e =
        ConstraintError(ErrorFromStatus(submitted), call->constraint_param);
    return Answer(*call, connection, e.http_status, ErrorBody(e));
  }
  call->submitted = true;
  if (!call->stream) return AnswerOrWait(call, connection);

  call->out = std::move(stream_start);
  MHD_Response* response = MHD_create_response_from_callback(
      MHD_SIZE_UNKNOWN, kStreamBlockBytes, &ReadStream, new CallHandle{call},
      &FreeStream);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
                          "text/event-stream");
  MHD_add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
  // Proxies that buffer (nginx) would hold tokens back.
  MHD_add_response_header(response, "X-Accel-Buffering", "no");
  MHD_add_response_header(response, kSessionHeader, call->session.c_str());
  call->sent_status = 200;
  const MHD_Result queued =
      MHD_queue_response(connection, MHD_HTTP_OK, response);
  MHD_destroy_response(response);
  return queued;
}

MHD_Result Handlers::StartChat(OpenAiServer& server,
                               const std::shared_ptr<Call>& call,
                               MHD_Connection* connection) {
  const OpenAiServer::Options& options = server.options_;
  ChatRequest parsed;
  OpenAiError error;
  if (!ParseChatRequest(call->body, options.model_id, options.limits, &parsed,
                        &error)) {
    return Answer(*call, connection, error.http_status, ErrorBody(error));
  }
  call->user = parsed.completion.user;
  call->body.clear();
  call->body.shrink_to_fit();
  const auto refuse = [&](const OpenAiError& e) {
    return Answer(*call, connection, e.http_status, ErrorBody(e));
  };
  if (options.chat_template == nullptr) {
    return refuse(
        NoChatTemplateError(options.model_id, options.no_chat_template));
  }
  ToolCallOptions tool_calls;
  if (std::optional<OpenAiError> e =
          ToolCallMode(parsed.tools, options.tool_call_parser, &tool_calls)) {
    return refuse(*e);
  }
  ChatOptions chat_options;
  chat_options.kwargs = std::move(parsed.template_kwargs);
  chat_options.tools = parsed.tools.tools;
  absl::StatusOr<jinja::Str> prompt =
      options.chat_template->Render(parsed.messages, chat_options);
  if (!prompt.ok()) {
    spdlog::debug("chat template refused a request: {}",
                  prompt.status().ToString());
    return refuse(ChatTemplateError(prompt.status()));
  }
  const std::vector<int32_t> ids =
      EncodeChatPrompt(*prompt, server.engine_.tokenizer());
  v1::GenerateRequest& generate = parsed.completion.generate;
  generate.mutable_token_ids()->mutable_ids()->Add(ids.begin(), ids.end());
  for (int32_t id : server.chat_stop_ids_) {
    generate.mutable_stopping()->add_stop_token_ids(id);
  }
  RequestFallbacks fallbacks;
  fallbacks.request_id = absl::StrFormat("chatcmpl-%016x", server.NextRandom());
  fallbacks.seed = server.NextRandom();
  if (!options.share_prefix_cache) fallbacks.cache_tenant = call->tenant;
  absl::StatusOr<Request> request =
      RequestFromProto(generate, server.vocabulary_, options.limits, fallbacks);
  if (!request.ok()) {
    spdlog::debug("rejected HTTP chat request: {}",
                  request.status().ToString());
    OpenAiError e =
        ConstraintError(ChatError(ErrorFromStatus(request.status()), parsed),
                        parsed.completion.constraint_param);
    return Answer(*call, connection, e.http_status, ErrorBody(e));
  }
  call->constraint_param = parsed.completion.constraint_param;
  auto renderer =
      std::make_unique<ChatRenderer>(Context(server, *request, parsed.logprobs,
                                             parsed.completion.include_usage),
                                     tool_calls);
  call->stream = parsed.completion.stream;
  // The role chunks go out at once, before the first token.
  std::string stream_start = call->stream ? renderer->StreamStart() : "";
  call->renderer = std::move(renderer);
  spdlog::debug(
      "HTTP chat request {} accepted: messages={} prompt_tokens={} "
      "max_new_tokens={} seed={} stream={}",
      request->id, parsed.messages.size(), request->prompt.size(),
      request->stopping.max_new_tokens, request->sampling.seed, call->stream);
  return Submit(server, call, connection, *std::move(request),
                std::move(stream_start));
}

MHD_Result Handlers::AnswerOrWait(const std::shared_ptr<Call>& call,
                                  MHD_Connection* connection) {
  std::vector<GenerationEvent> events;
  bool closing = false;
  {
    absl::MutexLock lock(&call->mu);
    events.swap(call->pending);
    closing = call->closing;
    if (!call->engine_done && !closing) {
      // Under the lock, so the sink's resume cannot come before it.
      call->suspended = true;
      MHD_suspend_connection(connection);
    }
  }
  for (GenerationEvent& event : events) call->renderer->Add(std::move(event));
  if (!call->renderer->ended()) {
    if (!closing) return MHD_YES;
    OpenAiError e = ErrorFromStatus(absl::UnavailableError(
        "the request was cancelled: the server is shutting down"));
    return Answer(*call, connection, e.http_status, ErrorBody(e));
  }
  auto [status, body] = call->renderer->Finish();
  return Answer(*call, connection, status, body);
}

EventSink Handlers::Sink(const std::shared_ptr<Call>& call) {
  return [call](GenerationEvent event) {
    absl::MutexLock lock(&call->mu);
    if (call->engine_done) return;
    if (!event.status.ok()) {
      call->engine_done = true;
    } else if (event.finish != FinishReason::kNone) {
      call->engine_done = ++call->finals >= call->n;
    }
    if (call->metrics != nullptr) {
      call->metrics->OnEvent(call->timeline, event, absl::Now());
    }
    if (call->connection == nullptr) return;  // nobody will read it
    call->pending.push_back(std::move(event));
    // Resuming takes MHD's own short lock and signals its event loop; it
    // never waits on the network. Done under the call's lock so that a
    // server being destroyed never sees a connection neither suspended nor
    // resumed.
    if (call->suspended) {
      call->suspended = false;
      MHD_resume_connection(call->connection);
    }
  };
}

ssize_t Handlers::ReadStream(void* cls, uint64_t /*pos*/, char* buf,
                             size_t max) {
  Call& call = *static_cast<CallHandle*>(cls)->call;
  while (call.out_pos == call.out.size()) {
    call.out.clear();
    call.out_pos = 0;
    if (call.stream_done) return MHD_CONTENT_READER_END_OF_STREAM;
    std::vector<GenerationEvent> events;
    {
      absl::MutexLock lock(&call.mu);
      events.swap(call.pending);
      if (events.empty()) {
        if (call.closing) return MHD_CONTENT_READER_END_WITH_ERROR;
        call.suspended = true;
        MHD_suspend_connection(call.connection);
        return 0;
      }
    }
    // Everything that piled up becomes one chunk.
    call.out = call.renderer->StreamEvents(std::move(events));
    call.stream_done = call.renderer->ended();
  }
  const size_t n = std::min(max, call.out.size() - call.out_pos);
  std::memcpy(buf, call.out.data() + call.out_pos, n);
  call.out_pos += n;
  return static_cast<ssize_t>(n);
}

void Handlers::FreeStream(void* cls) { delete static_cast<CallHandle*>(cls); }

void Handlers::Completed(void* cls, MHD_Connection* /*connection*/,
                         void** req_cls, MHD_RequestTerminationCode toe) {
  auto* handle = static_cast<CallHandle*>(*req_cls);
  if (handle == nullptr) return;
  *req_cls = nullptr;
  OpenAiServer& server = *static_cast<OpenAiServer*>(cls);
  std::shared_ptr<Call> call = std::move(handle->call);
  delete handle;
  // Set by the watcher only, when it found the client gone.
  const bool client_gone = call->control->cancelled.load();
  {
    absl::MutexLock lock(&call->mu);
    call->connection = nullptr;
    call->suspended = false;
    call->pending.clear();
    // The client went away (or the server is closing it): stop generating.
    if (call->submitted && !call->engine_done) call->control->cancelled = true;
  }
  if (call->submitted) server.Unregister(call.get());
  // The code the call counts under: the answer it got, or CANCELLED when
  // it did not get all of it (the client went away).
  const bool complete = toe == MHD_REQUEST_TERMINATED_COMPLETED_OK;
  absl::StatusCode code = absl::StatusCode::kCancelled;
  if (!call->submitted) {
    if (call->sent_status != 0) {
      code = StatusCodeForHttpStatus(call->sent_status);
    }
  } else if (complete && !client_gone) {
    code = call->stream ? call->renderer->final_code()
                        : StatusCodeForHttpStatus(call->sent_status);
  }
  if (server.options_.metrics != nullptr) {
    server.options_.metrics->OnCallDone(Frontend::kHttp,
                                        static_cast<grpc::StatusCode>(code));
  }
  server.active_calls_.fetch_sub(1);
}

OpenAiServer::OpenAiServer(Engine* engine, Options options)
    : engine_(*engine),
      options_(std::move(options)),
      vocabulary_(TokenizerVocabulary(engine->tokenizer(),
                                      engine->summary().prompt_rules)),
      created_(absl::ToUnixSeconds(absl::Now())) {
  if (options_.chat_template != nullptr) {
    chat_stop_ids_ = ChatStopIds(*options_.chat_template, engine->tokenizer());
  }
}

absl::StatusOr<std::unique_ptr<OpenAiServer>> OpenAiServer::Start(
    Engine* engine, Options options) {
  if (options.model_id.empty()) {
    return absl::InvalidArgumentError("the OpenAI server needs a model id");
  }
  absl::StatusOr<int> fd = ListenTcp(options.host, options.port);
  if (!fd.ok()) return fd.status();
  std::unique_ptr<OpenAiServer> server(
      new OpenAiServer(engine, std::move(options)));
  server->listen_fd_ = *fd;
  server->port_ = BoundPort(*fd);
  const Options& o = server->options_;
  const unsigned timeout = static_cast<unsigned>(
      std::max<int64_t>(1, absl::ToInt64Seconds(o.idle_timeout)));
  std::vector<MHD_OptionItem> tls = HttpsCredentials::DaemonOptions(o.tls);
  server->daemon_ = MHD_start_daemon(
      MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
          MHD_ALLOW_SUSPEND_RESUME | HttpsCredentials::DaemonFlags(o.tls),
      0, nullptr, nullptr, &Handlers::Access, server.get(),
      MHD_OPTION_LISTEN_SOCKET, *fd, MHD_OPTION_THREAD_POOL_SIZE,
      static_cast<unsigned>(std::max(1, o.threads)),
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, kConnectionMemoryBytes,
      MHD_OPTION_CONNECTION_TIMEOUT, timeout, MHD_OPTION_CONNECTION_LIMIT,
      kMaxConnections, MHD_OPTION_NOTIFY_COMPLETED, &Handlers::Completed,
      server.get(), MHD_OPTION_ARRAY, tls.data(), MHD_OPTION_END);
  if (server->daemon_ == nullptr) {
    close(*fd);
    server->listen_fd_ = -1;
    return absl::InternalError(absl::StrCat(
        "cannot start the OpenAI HTTP server on ", o.host, ":", o.port));
  }
  server->watcher_ = std::thread([s = server.get()] { s->WatchDisconnects(); });
  return server;
}

OpenAiServer::~OpenAiServer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    // MHD aborts when stopped with a connection suspended, so every waiting
    // call is resumed, and marked so that it does not wait again.
    for (const std::shared_ptr<Call>& call : calls_) {
      absl::MutexLock call_lock(&call->mu);
      call->closing = true;
      if (call->suspended) {
        call->suspended = false;
        MHD_resume_connection(call->connection);
      }
    }
  }
  if (watcher_.joinable()) watcher_.join();
  if (daemon_ != nullptr) MHD_stop_daemon(daemon_);
  // MHD_stop_daemon does not close a socket it was given.
  if (listen_fd_ >= 0) close(listen_fd_);
}

void OpenAiServer::Register(const std::shared_ptr<Call>& call) {
  absl::MutexLock lock(&mu_);
  if (stopping_) {
    absl::MutexLock call_lock(&call->mu);
    call->closing = true;
  }
  calls_.push_back(call);
}

void OpenAiServer::Unregister(const Call* call) {
  absl::MutexLock lock(&mu_);
  calls_.erase(std::remove_if(calls_.begin(), calls_.end(),
                              [call](const std::shared_ptr<Call>& c) {
                                return c.get() == call;
                              }),
               calls_.end());
}

void OpenAiServer::WatchDisconnects() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    for (const std::shared_ptr<Call>& call : calls_) {
      absl::MutexLock call_lock(&call->mu);
      // Only a suspended connection's socket is certain to stay open while
      // it is looked at; an active one MHD watches itself.
      if (!call->suspended || call->engine_done || call->fd < 0) continue;
      char byte;
      const ssize_t n =
          recv(call->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT | MSG_NOSIGNAL);
      const bool gone = n == 0 || (n < 0 && errno != EAGAIN &&
                                   errno != EWOULDBLOCK && errno != EINTR);
      if (gone && !call->control->cancelled.exchange(true)) {
        spdlog::debug("HTTP client went away; cancelling its request");
      }
    }
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.disconnect_poll);
  }
}

uint64_t OpenAiServer::NextRandom() {
  absl::MutexLock lock(&rng_mu_);
  return absl::Uniform<uint64_t>(rng_);
}

}  // namespace seqboat
