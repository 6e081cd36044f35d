// A request's output constraint as the OpenAI API spells it: response_format
// ({"type": "text" | "json_object" | "json_schema", "json_schema": {"name",
// "schema", "strict", "description"}}) and vLLM's guided_json,
// guided_regex, guided_choice and guided_grammar, on both endpoints, read
// into SamplingParams' constraint oneof (whose size limits and syntax
// request_validation and the engine then check). At most one per request;
// a second is refused naming both. Internal to //server:openai_request.
#ifndef SEQBOAT_SERVER_OPENAI_CONSTRAINT_H_
#define SEQBOAT_SERVER_OPENAI_CONSTRAINT_H_

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "seqboat/v1/generate.pb.h"
#include "server/openai_error.h"

namespace seqboat::openai {

// The body's constraint parameters (text of response_format needs none):
// sets `sampling`'s oneof and *param to the parameter that set it, or
// leaves both alone when there is none.
std::optional<OpenAiError> ReadConstraint(const nlohmann::json& body,
                                          v1::SamplingParams* sampling,
                                          std::string* param);

}  // namespace seqboat::openai

#endif  // SEQBOAT_SERVER_OPENAI_CONSTRAINT_H_
