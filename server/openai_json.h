// How the OpenAI front end writes JSON: fields in OpenAI's order (what
// people read in curl), a stray invalid byte replaced rather than thrown,
// and an empty string as null where OpenAI writes null.
#ifndef SEQBOAT_SERVER_OPENAI_JSON_H_
#define SEQBOAT_SERVER_OPENAI_JSON_H_

#include <nlohmann/json.hpp>
#include <string>

namespace seqboat {

std::string Dump(const nlohmann::ordered_json& value);

nlohmann::ordered_json NullIfEmpty(const std::string& s);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_OPENAI_JSON_H_
