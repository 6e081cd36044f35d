// JSON (as a request or a test carries it, keys in their written order) as
// template values: null -> None, true/false, integers, floats, strings,
// arrays -> lists, objects -> dicts. Strings are marked untrusted when they
// come from a client (tools, tool calls), so that special-token text in them
// is never read as a control token.
#ifndef SEQBOAT_SERVER_JINJA_JSON_VALUE_H_
#define SEQBOAT_SERVER_JINJA_JSON_VALUE_H_

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "server/jinja/value.h"

namespace seqboat::jinja {

// INVALID_ARGUMENT for an integer beyond int64 or nesting deeper than
// kMaxValueDepth.
absl::StatusOr<Value> FromJson(const nlohmann::ordered_json& j, bool untrusted);

}  // namespace seqboat::jinja

#endif  // SEQBOAT_SERVER_JINJA_JSON_VALUE_H_
