// seqboat_load: a load generator for seqboat.v1.TextGeneration. Closed loop
// (--concurrency N streams) or open loop (--request_rate R Poisson arrivals,
// --max_inflight), for --num_requests or --duration_s; or, with
// --workload=chat, multi-turn conversations that resend their growing
// history each turn. Prints a live progress line on stderr, a summary table
// on stdout, and writes --result_json.
#include <grpcpp/grpcpp.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/common/api_key.h"
#include "clients/common/tls.h"
#include "clients/load/chat.h"
#include "clients/load/chat_runner.h"
#include "clients/load/result_json.h"
#include "clients/load/runner.h"
#include "clients/load/stats.h"
#include "clients/load/workload.h"
#include "seqboat/v1/generate.grpc.pb.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051",
          "host:port of a server or a load balancer.");
ABSL_FLAG(std::string, tls_server_name, "",
          "With TLS: the name to check the certificate against, if not "
          "the target's host.");
ABSL_FLAG(std::string, api_key, "",
          "API key of a server started with --api_keys_file (default: the "
          "SEQBOAT_API_KEY environment variable).");
ABSL_FLAG(int32_t, num_channels, 0,
          "HTTP/2 connections to spread the streams over (round-robin; a "
          "chat conversation keeps to one); 0: one per 64 streams in flight, "
          "so that no connection's single thread limits the client.");
ABSL_FLAG(std::string, workload, "requests",
          "requests: independent requests (synthetic, or --prompts_jsonl). "
          "chat: --concurrency conversations in parallel, each "
          "--chat_turns turns; turn 0 sends --chat_history_len random ids, "
          "each later turn the previous prompt + the streamed answer "
          "(--output_len tokens) + --chat_user_len new random ids.");
ABSL_FLAG(int32_t, concurrency, 0,
          "Closed loop: streams kept in flight. Chat: conversations in "
          "flight.");
ABSL_FLAG(double, request_rate, 0,
          "Open loop: Poisson arrivals per second (inf: all at once).");
ABSL_FLAG(int32_t, max_inflight, 0, "Open loop: cap on streams in flight.");
ABSL_FLAG(int64_t, num_requests, 0, "Requests to send (0: use --duration_s).");
ABSL_FLAG(double, duration_s, 0,
          "Stop starting requests after this many seconds (0: use "
          "--num_requests).");
ABSL_FLAG(std::string, prompts_jsonl, "",
          "Lines {\"text\": ...} or {\"token_ids\": [...]}, optional "
          "\"max_new_tokens\"; cycled. Empty: synthetic prompts.");
ABSL_FLAG(int32_t, input_len, 128, "Synthetic prompt length in tokens.");
ABSL_FLAG(int32_t, output_len, 128,
          "max_new_tokens (synthetic, JSONL lines without one, and each chat "
          "turn's answer).");
ABSL_FLAG(double, range_ratio, 0,
          "Synthetic lengths uniform in len * [1 - r, 1 + r]; 0: fixed.");
ABSL_FLAG(int32_t, chat_turns, 4, "Chat: turns per conversation.");
ABSL_FLAG(int32_t, chat_history_len, 1024,
          "Chat: turn 0's prompt length in tokens (random ids).");
ABSL_FLAG(int32_t, chat_user_len, 64,
          "Chat: new user message per later turn, in tokens (random ids).");
ABSL_FLAG(int32_t, chat_conversations, 0,
          "Chat: conversations in all; a new one starts when one ends "
          "(0: --concurrency, all at once).");
ABSL_FLAG(bool, chat_lockstep, false,
          "Chat: a turn starts only when every conversation in flight has "
          "finished the one before, so turn N of all of them runs together "
          "(per-turn figures not mixed with other conversations' earlier, "
          "longer prefills).");
ABSL_FLAG(bool, chat_session_ids, false,
          "Chat: each conversation's turns send x-session-id metadata (one "
          "key per conversation), for a balancer that routes by it.");
ABSL_FLAG(uint64_t, seed, 0, "Seeds prompts, arrivals and sampling.");
ABSL_FLAG(double, temperature, 0, "Sampling temperature (0: greedy).");
ABSL_FLAG(bool, ignore_eos, true,
          "Generate exactly max_new_tokens (past the model's EOS).");
ABSL_FLAG(double, request_timeout_s, 600, "Deadline of each stream.");
ABSL_FLAG(std::string, result_json, "", "Write the results here.");
ABSL_FLAG(std::string, label, "",
          "Stored as config.label in --result_json; plot.py names curves by "
          "it (e.g. cache-on).");
ABSL_FLAG(bool, save_requests, false,
          "Include one entry per request in --result_json.");
ABSL_FLAG(bool, progress, true, "Live progress line on stderr.");

namespace seqboat {
namespace load {
namespace {

// --num_channels, or one connection per 64 streams in flight.
int32_t ChannelCount() {
  if (absl::GetFlag(FLAGS_num_channels) != 0) {
    return absl::GetFlag(FLAGS_num_channels);
  }
  const int32_t streams = std::max(absl::GetFlag(FLAGS_concurrency),
                                   absl::GetFlag(FLAGS_max_inflight));
  return std::max(1, (streams + 63) / 64);
}

// This process's CPU time, user and system, in seconds: a client that uses
// all of a core's time is measuring itself, not the server.
double CpuSeconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_utime.tv_sec + r.ru_stime.tv_sec +
         1e-6 * (r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

std::string CpuLine(double cpu_s, double wall_s) {
  return absl::StrFormat("%-40s %.2f (%.2f cores over %.1f s)\n",
                         "Client CPU time (s):", cpu_s,
                         wall_s > 0 ? cpu_s / wall_s : 0.0, wall_s);
}

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> MakeChannels() {
  const int32_t n = ChannelCount();
  if (n < 1) return absl::InvalidArgumentError("--num_channels must be >= 0");
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> creds =
      ChannelCredentialsFrom(ClientTlsFilesFromFlags());
  if (!creds.ok()) return creds.status();
  const std::string api_key = ApiKeyFrom(absl::GetFlag(FLAGS_api_key));
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int32_t i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    // Distinct arguments keep gRPC from sharing one connection among them.
    args.SetInt("seqboat.load.channel", i);
    if (!absl::GetFlag(FLAGS_tls_server_name).empty()) {
      args.SetSslTargetNameOverride(absl::GetFlag(FLAGS_tls_server_name));
    }
    channels.push_back(CreateChannelWithApiKey(absl::GetFlag(FLAGS_target),
                                               *creds, args, api_key));
  }
  return channels;
}

absl::StatusOr<v1::ModelInfo> FetchModelInfo(grpc::Channel& channel) {
  auto stub = v1::TextGeneration::NewStub(
      std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  // Wait for the server to come up rather than failing at once.
  context.set_wait_for_ready(true);
  v1::ModelInfo info;
  grpc::Status status = stub->GetModelInfo(&context, {}, &info);
  if (!status.ok()) {
    return absl::UnavailableError(
        absl::StrCat("GetModelInfo: ", status.error_message()));
  }
  return info;
}

// Options of the request workload that a chat run would silently ignore.
absl::Status CheckNoRequestFlags() {
  if (absl::GetFlag(FLAGS_request_rate) != 0 ||
      absl::GetFlag(FLAGS_max_inflight) != 0 ||
      absl::GetFlag(FLAGS_num_requests) != 0 ||
      absl::GetFlag(FLAGS_duration_s) != 0 ||
      !absl::GetFlag(FLAGS_prompts_jsonl).empty() ||
      absl::GetFlag(FLAGS_range_ratio) != 0) {
    return absl::InvalidArgumentError(
        "--workload=chat is closed loop and sized by --concurrency, "
        "--chat_conversations and --chat_turns: --request_rate, "
        "--max_inflight, --num_requests, --duration_s, --prompts_jsonl and "
        "--range_ratio do not apply");
  }
  return absl::OkStatus();
}

bool WriteJson(const std::string& path, const nlohmann::json& out) {
  std::ofstream f(path);
  f << out.dump(2) << "\n";
  if (!f) {
    std::cerr << "seqboat_load: cannot write " << path << "\n";
    return false;
  }
  return true;
}

int RunChatWorkload() {
  if (absl::Status s = CheckNoRequestFlags(); !s.ok()) {
    std::cerr << "seqboat_load: " << s.message() << "\n";
    return 2;
  }
  ChatRunOptions options;
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.request_timeout_s = absl::GetFlag(FLAGS_request_timeout_s);
  options.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  options.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  options.lockstep = absl::GetFlag(FLAGS_chat_lockstep);
  options.session_ids = absl::GetFlag(FLAGS_chat_session_ids);
  ChatSpec& spec = options.spec;
  spec.conversations = absl::GetFlag(FLAGS_chat_conversations) > 0
                           ? absl::GetFlag(FLAGS_chat_conversations)
                           : options.concurrency;
  spec.turns = absl::GetFlag(FLAGS_chat_turns);
  spec.history_len = absl::GetFlag(FLAGS_chat_history_len);
  spec.user_len = absl::GetFlag(FLAGS_chat_user_len);
  spec.output_len = absl::GetFlag(FLAGS_output_len);
  spec.seed = absl::GetFlag(FLAGS_seed);
  options.request_id_prefix = absl::StrCat("chat-", spec.seed);
  if (absl::Status s = ValidateChatRunOptions(options); !s.ok()) {
    std::cerr << "seqboat_load: " << s.message() << "\n";
    return 2;
  }
  auto channels = MakeChannels();
  if (!channels.ok()) {
    std::cerr << "seqboat_load: " << channels.status().message() << "\n";
    return 2;
  }
  auto info = FetchModelInfo(*(*channels)[0]);
  if (!info.ok()) {
    std::cerr << "seqboat_load: " << info.status().message() << "\n";
    return 1;
  }
  spec.vocab_size = info->vocab_size();
  if (absl::Status s = ValidateChatRunOptions(options); !s.ok()) {
    std::cerr << "seqboat_load: " << s.message() << "\n";
    return 2;
  }
  // Every turn past the limit would fail with INVALID_ARGUMENT; say so now.
  if (info->max_prompt_tokens() > 0 &&
      LongestChatPrompt(spec) > info->max_prompt_tokens()) {
    std::cerr << "seqboat_load: the last turn's prompt ("
              << LongestChatPrompt(spec)
              << " tokens) exceeds the server's max_prompt_tokens ("
              << info->max_prompt_tokens()
              << "); fewer turns, a shorter history, or a larger "
                 "--max_prompt_tokens on the server\n";
    return 2;
  }

  const bool progress = absl::GetFlag(FLAGS_progress);
  const int32_t total = spec.conversations;
  auto result =
      RunChat(*channels, options, [progress, total](const ChatProgress& p) {
        if (!progress) return;
        std::fprintf(stderr,
                     "\r[%6.1fs] conversations done %lld/%d  turns done %lld  "
                     "failed %lld  in flight %lld  %.1f tok/s   ",
                     p.elapsed_s, static_cast<long long>(p.conversations_done),
                     total, static_cast<long long>(p.turns_done),
                     static_cast<long long>(p.failed),
                     static_cast<long long>(p.in_flight),
                     p.elapsed_s > 0 ? p.output_tokens / p.elapsed_s : 0.0);
        std::fflush(stderr);
      });
  if (progress) std::fprintf(stderr, "\n");
  if (!result.ok()) {
    std::cerr << "seqboat_load: " << result.status().message() << "\n";
    return 2;
  }
  std::vector<RequestRecord> records;
  records.reserve(result->turns.size());
  for (const ChatTurnRecord& t : result->turns) records.push_back(t.request);
  const Summary summary = Summarize(records, result->duration_s);
  const std::vector<TurnSummary> turns =
      SummarizeTurns(result->turns, spec.turns);
  const double cpu_s = CpuSeconds();
  std::cout << SummaryTable(summary) << TurnTable(turns)
            << CpuLine(cpu_s, result->duration_s) << std::flush;

  const std::string out_path = absl::GetFlag(FLAGS_result_json);
  if (!out_path.empty()) {
    nlohmann::json config = {{"target", absl::GetFlag(FLAGS_target)},
                             {"workload", "chat"},
                             {"mode", "closed"},
                             {"concurrency", options.concurrency},
                             {"conversations", spec.conversations},
                             {"turns", spec.turns},
                             {"history_len", spec.history_len},
                             {"user_len", spec.user_len},
                             {"output_len", spec.output_len},
                             {"seed", spec.seed},
                             {"temperature", options.temperature},
                             {"ignore_eos", options.ignore_eos},
                             {"num_channels", ChannelCount()},
                             {"tls", ClientTlsFilesFromFlags().enabled()}};
    if (!absl::GetFlag(FLAGS_label).empty()) {
      config["label"] = absl::GetFlag(FLAGS_label);
    }
    nlohmann::json out =
        ResultJson(config, summary,
                   absl::GetFlag(FLAGS_save_requests) ? &records : nullptr);
    out["turns"] = TurnsJson(turns);
    out["client_cpu_s"] = cpu_s;
    if (!WriteJson(out_path, out)) return 2;
  }
  return 0;
}

int Run() {
  const std::string workload = absl::GetFlag(FLAGS_workload);
  if (workload == "chat") return RunChatWorkload();
  if (workload != "requests") {
    std::cerr << "seqboat_load: --workload must be requests or chat\n";
    return 2;
  }
  RunOptions options;
  options.concurrency = absl::GetFlag(FLAGS_concurrency);
  options.request_rate = absl::GetFlag(FLAGS_request_rate);
  options.max_inflight = absl::GetFlag(FLAGS_max_inflight);
  options.num_requests = absl::GetFlag(FLAGS_num_requests);
  options.duration_s = absl::GetFlag(FLAGS_duration_s);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.request_timeout_s = absl::GetFlag(FLAGS_request_timeout_s);
  options.temperature = static_cast<float>(absl::GetFlag(FLAGS_temperature));
  options.ignore_eos = absl::GetFlag(FLAGS_ignore_eos);
  options.default_max_new_tokens = absl::GetFlag(FLAGS_output_len);
  options.request_id_prefix = absl::StrCat("load-", options.seed);
  if (absl::Status s = ValidateRunOptions(options); !s.ok()) {
    std::cerr << "seqboat_load: " << s.message() << "\n";
    return 2;
  }
  auto channels = MakeChannels();
  if (!channels.ok()) {
    std::cerr << "seqboat_load: " << channels.status().message() << "\n";
    return 2;
  }

  PromptSource prompts;
  const std::string jsonl = absl::GetFlag(FLAGS_prompts_jsonl);
  if (!jsonl.empty()) {
    auto loaded = LoadPromptsJsonl(jsonl);
    if (!loaded.ok()) {
      std::cerr << "seqboat_load: " << loaded.status().message() << "\n";
      return 2;
    }
    prompts = [list = *std::move(loaded)](int64_t i) {
      return list[static_cast<size_t>(i) % list.size()];
    };
  } else {
    SyntheticSpec spec;
    spec.input_len = absl::GetFlag(FLAGS_input_len);
    spec.output_len = absl::GetFlag(FLAGS_output_len);
    spec.range_ratio = absl::GetFlag(FLAGS_range_ratio);
    spec.seed = options.seed;
    auto info = FetchModelInfo(*(*channels)[0]);
    if (!info.ok()) {
      std::cerr << "seqboat_load: " << info.status().message() << "\n";
      return 1;
    }
    spec.vocab_size = info->vocab_size();
    if (absl::Status s = ValidateSyntheticSpec(spec); !s.ok()) {
      std::cerr << "seqboat_load: " << s.message() << "\n";
      return 2;
    }
    prompts = [spec](int64_t i) { return SyntheticPrompt(spec, i); };
  }

  const bool progress = absl::GetFlag(FLAGS_progress);
  auto result =
      RunLoad(*channels, options, prompts, [progress](const Progress& p) {
        if (!progress) return;
        std::fprintf(stderr,
                     "\r[%6.1fs] started %lld  done %lld  failed %lld  "
                     "in flight %lld  %.1f tok/s   ",
                     p.elapsed_s, static_cast<long long>(p.started),
                     static_cast<long long>(p.finished),
                     static_cast<long long>(p.failed),
                     static_cast<long long>(p.in_flight),
                     p.elapsed_s > 0 ? p.output_tokens / p.elapsed_s : 0.0);
        std::fflush(stderr);
      });
  if (progress) std::fprintf(stderr, "\n");
  if (!result.ok()) {
    std::cerr << "seqboat_load: " << result.status().message() << "\n";
    return 2;
  }
  const Summary summary = Summarize(result->records, result->duration_s);
  const double cpu_s = CpuSeconds();
  std::cout << SummaryTable(summary) << CpuLine(cpu_s, result->duration_s)
            << std::flush;

  const std::string out_path = absl::GetFlag(FLAGS_result_json);
  if (!out_path.empty()) {
    nlohmann::json config = {
        {"target", absl::GetFlag(FLAGS_target)},
        {"mode", options.concurrency > 0 ? "closed" : "open"},
        {"concurrency", options.concurrency},
        {"request_rate", std::isinf(options.request_rate)
                             ? nlohmann::json("inf")
                             : nlohmann::json(options.request_rate)},
        {"max_inflight", options.max_inflight},
        {"num_requests", options.num_requests},
        {"duration_s", options.duration_s},
        {"prompts_jsonl", jsonl},
        {"input_len", absl::GetFlag(FLAGS_input_len)},
        {"output_len", absl::GetFlag(FLAGS_output_len)},
        {"range_ratio", absl::GetFlag(FLAGS_range_ratio)},
        {"seed", options.seed},
        {"temperature", options.temperature},
        {"num_channels", ChannelCount()},
        {"tls", ClientTlsFilesFromFlags().enabled()},
        {"workload", "requests"}};
    if (!absl::GetFlag(FLAGS_label).empty()) {
      config["label"] = absl::GetFlag(FLAGS_label);
    }
    nlohmann::json out = ResultJson(
        config, summary,
        absl::GetFlag(FLAGS_save_requests) ? &result->records : nullptr);
    out["client_cpu_s"] = cpu_s;
    if (!WriteJson(out_path, out)) return 2;
  }
  // Exit status 0 even with failed requests: they are results, not errors
  // of the tool. The JSON and the table carry the counts.
  return 0;
}

}  // namespace
}  // namespace load
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Load generator for seqboat.\n"
      "  seqboat_load --target=HOST:PORT --concurrency=8 --num_requests=200 "
      "[--result_json=out.json]\n"
      "  seqboat_load --target=HOST:PORT --request_rate=4 --duration_s=60\n"
      "  seqboat_load --target=HOST:PORT --workload=chat --concurrency=16 "
      "--chat_turns=4 --chat_history_len=4096 --chat_user_len=64 "
      "--output_len=128");
  absl::ParseCommandLine(argc, argv);
  return seqboat::load::Run();
}
