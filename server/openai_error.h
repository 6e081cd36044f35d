// OpenAI's error object ({"error": {"message", "type", "param", "code"}})
// and the HTTP status it goes with: from a status of validation or the
// engine, or from the HTTP layer itself (unknown URL, wrong method).
#ifndef SEQBOAT_SERVER_OPENAI_ERROR_H_
#define SEQBOAT_SERVER_OPENAI_ERROR_H_

#include <string>

#include "absl/status/status.h"

namespace seqboat {

struct OpenAiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // "" is rendered as null
  std::string code;   // "" is rendered as null
};

// {"error": {"message": ..., "type": ..., "param": ..., "code": ...}}
std::string ErrorBody(const OpenAiError& error);

// A status from validation or the engine as OpenAI's error: INVALID_ARGUMENT
// is 400 with the field renamed to the OpenAI parameter it came from
// ("stopping.max_new_tokens must be ..." becomes "max_tokens must be ...",
// param "max_tokens"), RESOURCE_EXHAUSTED (queue full) 429, UNAVAILABLE
// (draining, device lost) 503, NOT_FOUND 404, anything else 500.
OpenAiError ErrorFromStatus(const absl::Status& status);

// The status code of the same meaning as an HTTP status (400 is
// INVALID_ARGUMENT, 429 RESOURCE_EXHAUSTED...), for the metrics both front
// ends share.
absl::StatusCode StatusCodeForHttpStatus(int http_status);

// An error of the HTTP layer, with no param.
OpenAiError HttpError(int status, std::string message, std::string type,
                      std::string code = "");
// 404 "Invalid URL (METHOD PATH)".
OpenAiError NotFound(const char* method, const std::string& path);
// 405, naming the method `path` allows.
OpenAiError MethodNotAllowed(const char* method, const std::string& path,
                             const char* allowed);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_ERROR_H_
