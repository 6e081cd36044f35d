#include "server/openai_error.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "server/openai_json.h"
#include "server/request_validation.h"

namespace seqboat {
namespace {

// The proto's field names (request_validation's) to OpenAI's parameters.
struct FieldName {
  const char* proto;
  const char* openai;
};
constexpr FieldName kFieldNames[] = {
    {"text", "prompt"},
    {"token_ids.ids", "prompt"},
    {"prompt", "prompt"},
    {"sampling.temperature", "temperature"},
    {"sampling.top_k", "top_k"},
    {"sampling.top_p", "top_p"},
    {"sampling.min_p", "min_p"},
    {"sampling.repetition_penalty", "repetition_penalty"},
    {"sampling.presence_penalty", "presence_penalty"},
    {"sampling.frequency_penalty", "frequency_penalty"},
    {"sampling.seed", "seed"},
    {"stopping.max_new_tokens", "max_tokens"},
    {"stopping.min_new_tokens", "min_tokens"},
    {"stopping.stop_token_ids", "stop_token_ids"},
    {"stopping.stop", "stop"},
    {"stopping.ignore_eos", "ignore_eos"},
    {"logprobs.top_n", "logprobs"},
    {"n", "n"},
};

}  // namespace

std::string ErrorBody(const OpenAiError& error) {
  nlohmann::ordered_json inner;
  inner["message"] = error.message;
  inner["type"] = error.type;
  inner["param"] = NullIfEmpty(error.param);
  inner["code"] = NullIfEmpty(error.code);
  nlohmann::ordered_json body;
  body["error"] = std::move(inner);
  return Dump(body);
}

OpenAiError ErrorFromStatus(const absl::Status& status) {
  OpenAiError e;
  e.message = std::string(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument: {
      e.http_status = 400;
      const std::string field = InvalidField(status);
      if (field.empty()) break;
      const std::string base = field.substr(0, field.find('['));
      for (const FieldName& name : kFieldNames) {
        if (base != name.proto) continue;
        e.param = name.openai;
        // "token_ids.ids[3] must ..." reads "prompt[3] must ...".
        std::string renamed =
            absl::StrCat(name.openai, field.substr(base.size()));
        if (absl::StartsWith(e.message, field)) {
          e.message = renamed + e.message.substr(field.size());
        }
        break;
      }
      break;
    }
    case absl::StatusCode::kResourceExhausted:
      e.http_status = 429;
      e.type = "server_overloaded";
      e.code = "queue_full";
      break;
    case absl::StatusCode::kUnavailable:
      e.http_status = 503;
      e.type = "service_unavailable";
      break;
    case absl::StatusCode::kNotFound:
      e.http_status = 404;
      break;
    case absl::StatusCode::kCancelled:
      // Nobody reads it (the client went away); 499 as nginx logs it.
      e.http_status = 499;
      e.type = "cancelled";
      break;
    case absl::StatusCode::kDeadlineExceeded:
      e.http_status = 504;
      e.type = "timeout";
      break;
    default:
      e.http_status = 500;
      e.type = "server_error";
      break;
  }
  return e;
}

absl::StatusCode StatusCodeForHttpStatus(int http_status) {
  switch (http_status) {
    case 200:
      return absl::StatusCode::kOk;
    case 404:
      return absl::StatusCode::kNotFound;
    case 429:
      return absl::StatusCode::kResourceExhausted;
    case 499:
      return absl::StatusCode::kCancelled;
    case 503:
      return absl::StatusCode::kUnavailable;
    case 504:
      return absl::StatusCode::kDeadlineExceeded;
    default:
      return http_status >= 400 && http_status < 500
                 ? absl::StatusCode::kInvalidArgument
                 : absl::StatusCode::kInternal;
  }
}

OpenAiError HttpError(int status, std::string message, std::string type,
                      std::string code) {
  OpenAiError e;
  e.http_status = status;
  e.message = std::move(message);
  e.type = std::move(type);
  e.code = std::move(code);
  return e;
}

OpenAiError NotFound(const char* method, const std::string& path) {
  return HttpError(404, absl::StrCat("Invalid URL (", method, " ", path, ")"),
                   "invalid_request_error");
}

OpenAiError MethodNotAllowed(const char* method, const std::string& path,
                             const char* allowed) {
  return HttpError(
      405, absl::StrCat(method, " is not allowed on ", path, "; use ", allowed),
      "invalid_request_error");
}

}  // namespace seqboat
