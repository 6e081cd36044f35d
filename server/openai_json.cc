#include "server/openai_json.h"

namespace seqboat {

std::string Dump(const nlohmann::ordered_json& value) {
  // Text from the engine is complete UTF-8 and token texts go through
  // TokenText; the replace handler keeps anything else from throwing.
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

nlohmann::ordered_json NullIfEmpty(const std::string& s) {
  return s.empty() ? nlohmann::ordered_json(nullptr)
                   : nlohmann::ordered_json(s);
}

}  // namespace seqboat
