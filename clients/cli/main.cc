// seqboat_cli: streams the continuation of a prompt from a seqboat server to
// stdout as it arrives; the finish reason and token usage go to stderr.
//   seqboat_cli --server localhost:50051 --prompt "Once upon a time"
// Exits 1 with the server's message when the call fails.
#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_split.h"
#include "clients/common/api_key.h"
#include "clients/common/tls.h"
#include "seqboat/v1/generate.grpc.pb.h"

ABSL_FLAG(std::string, server, "localhost:50051", "Server address.");
ABSL_FLAG(std::string, prompt, "", "The prompt text.");
ABSL_FLAG(std::optional<uint32_t>, max_new_tokens, std::nullopt,
          "Tokens to generate at most (server default if unset).");
ABSL_FLAG(std::optional<float>, temperature, std::nullopt,
          "Sampling temperature; 0 = greedy.");
ABSL_FLAG(std::optional<int32_t>, top_k, std::nullopt, "Top-k; 0 = off.");
ABSL_FLAG(std::optional<float>, top_p, std::nullopt, "Nucleus top-p.");
ABSL_FLAG(std::optional<float>, min_p, std::nullopt, "Min-p.");
ABSL_FLAG(std::optional<float>, repetition_penalty, std::nullopt,
          "Repetition penalty; 1 = off.");
ABSL_FLAG(std::optional<uint64_t>, seed, std::nullopt,
          "Sampling seed (random if unset).");
ABSL_FLAG(std::vector<std::string>, stop, {},
          "Stop string; repeat the flag or give a comma-separated list.");
ABSL_FLAG(bool, ignore_eos, false, "Keep generating past the EOS token.");
ABSL_FLAG(uint32_t, logprobs, 0,
          "Print the logprob of each token and the top-N alternatives to "
          "stderr (0 = off).");
ABSL_FLAG(std::string, api_key, "",
          "API key of a server started with --api_keys_file (default: the "
          "SEQBOAT_API_KEY environment variable).");
ABSL_FLAG(std::string, request_id, "",
          "Request id (server makes one if empty).");

namespace seqboat {
namespace {

const char* FinishReasonText(v1::FinishReason reason) {
  switch (reason) {
    case v1::FINISH_REASON_LENGTH:
      return "length";
    case v1::FINISH_REASON_STOP_STRING:
      return "stop_string";
    case v1::FINISH_REASON_EOS:
      return "eos";
    case v1::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "unspecified";
  }
}

v1::GenerateRequest BuildRequest(const std::vector<std::string>& stops) {
  v1::GenerateRequest request;
  request.set_request_id(absl::GetFlag(FLAGS_request_id));
  request.set_text(absl::GetFlag(FLAGS_prompt));
  v1::SamplingParams* sampling = request.mutable_sampling();
  if (auto v = absl::GetFlag(FLAGS_temperature)) sampling->set_temperature(*v);
  if (auto v = absl::GetFlag(FLAGS_top_k)) sampling->set_top_k(*v);
  if (auto v = absl::GetFlag(FLAGS_top_p)) sampling->set_top_p(*v);
  if (auto v = absl::GetFlag(FLAGS_min_p)) sampling->set_min_p(*v);
  if (auto v = absl::GetFlag(FLAGS_repetition_penalty)) {
    sampling->set_repetition_penalty(*v);
  }
  if (auto v = absl::GetFlag(FLAGS_seed)) sampling->set_seed(*v);
  v1::StoppingCriteria* stopping = request.mutable_stopping();
  if (auto v = absl::GetFlag(FLAGS_max_new_tokens)) {
    stopping->set_max_new_tokens(*v);
  }
  for (const std::string& stop : stops) stopping->add_stop(stop);
  stopping->set_ignore_eos(absl::GetFlag(FLAGS_ignore_eos));
  const uint32_t top_n = absl::GetFlag(FLAGS_logprobs);
  if (top_n > 0) {
    request.mutable_logprobs()->set_enabled(true);
    request.mutable_logprobs()->set_top_n(top_n);
  }
  return request;
}

// "--stop a --stop b,c" gives {"a", "b", "c"}: the flag parser already
// splits each value at commas, and repeating the flag keeps earlier values.
std::vector<std::string> StopStrings(int argc, char** argv) {
  std::vector<std::string> stops;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    if (arg == "--stop" || arg == "-stop") {
      if (i + 1 < argc) value = argv[++i];
    } else if (arg.rfind("--stop=", 0) == 0 || arg.rfind("-stop=", 0) == 0) {
      value = arg.substr(arg.find('=') + 1);
    } else {
      continue;
    }
    for (absl::string_view s : absl::StrSplit(value, ',', absl::SkipEmpty())) {
      stops.emplace_back(s);
    }
  }
  return stops;
}

int Run(const std::vector<std::string>& stops) {
  if (absl::GetFlag(FLAGS_prompt).empty()) {
    std::cerr << "seqboat_cli: --prompt is required\n";
    return 1;
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      ChannelCredentialsFrom(ClientTlsFilesFromFlags());
  if (!credentials.ok()) {
    std::cerr << "seqboat_cli: " << credentials.status().message() << "\n";
    return 1;
  }
  auto stub = v1::TextGeneration::NewStub(
      CreateChannelWithApiKey(absl::GetFlag(FLAGS_server), *credentials, {},
                              ApiKeyFrom(absl::GetFlag(FLAGS_api_key))));
  grpc::ClientContext context;
  auto reader = stub->Generate(&context, BuildRequest(stops));

  v1::GenerateResponse message;
  v1::GenerateResponse last;
  bool got_last = false;
  while (reader->Read(&message)) {
    std::cout << message.text() << std::flush;
    for (const v1::TokenLogprobs& lp : message.logprobs()) {
      std::cerr << "[" << lp.chosen().token_id() << " "
                << lp.chosen().logprob();
      for (const v1::TokenLogprob& top : lp.top()) {
        std::cerr << " | " << top.token_id() << " " << top.logprob();
      }
      std::cerr << "]\n";
    }
    if (message.finish_reason() != v1::FINISH_REASON_UNSPECIFIED) {
      last = message;
      got_last = true;
    }
  }
  grpc::Status status = reader->Finish();
  std::cout << std::endl;
  if (!status.ok()) {
    std::cerr << "seqboat_cli: error " << status.error_code() << ": "
              << status.error_message() << "\n";
    return 1;
  }
  if (got_last) {
    std::cerr << "finish: " << FinishReasonText(last.finish_reason());
    if (!last.matched_stop().empty()) {
      std::cerr << " (matched \"" << last.matched_stop() << "\")";
    }
    std::cerr << "; prompt_tokens: " << last.usage().prompt_tokens()
              << ", generated_tokens: " << last.usage().generated_tokens()
              << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace seqboat

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Streams a completion from a seqboat server.\n"
      "  seqboat_cli --server localhost:50051 --prompt \"text\" "
      "[--max_new_tokens N] [--stop S]...");
  std::vector<std::string> stops = seqboat::StopStrings(argc, argv);
  absl::ParseCommandLine(argc, argv);
  return seqboat::Run(stops);
}
