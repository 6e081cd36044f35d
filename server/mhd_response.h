// A whole response queued on a libmicrohttpd connection in one call: the
// OpenAI port's answers and errors, with the headers they carry.
#ifndef SEQBOAT_SERVER_MHD_RESPONSE_H_
#define SEQBOAT_SERVER_MHD_RESPONSE_H_

#include <microhttpd.h>

#include <string>
#include <utility>
#include <vector>

#include "server/openai_error.h"

namespace seqboat {

inline constexpr char kJson[] = "application/json";

// Headers beside the content type (Allow, WWW-Authenticate, Retry-After,
// x-session-id); one with a null name is skipped.
using Headers = std::vector<std::pair<const char*, std::string>>;

MHD_Result Respond(MHD_Connection* connection, unsigned status,
                   const std::string& body, const char* content_type,
                   const Headers& headers = {});

// `error` as OpenAI words errors, with its HTTP status.
MHD_Result RespondError(MHD_Connection* connection, const OpenAiError& error,
                        const Headers& headers = {});

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_MHD_RESPONSE_H_
