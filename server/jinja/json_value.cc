#include "server/jinja/json_value.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "server/jinja/text.h"

namespace seqboat::jinja {
namespace {

using json = nlohmann::ordered_json;

absl::StatusOr<Value> Convert(const json& j, bool untrusted, int depth) {
  if (depth > kMaxValueDepth) {
    return absl::InvalidArgumentError("JSON nested too deeply for a template");
  }
  switch (j.type()) {
    case json::value_t::null:
      return Value::None();
    case json::value_t::boolean:
      return Value::Bool(j.get<bool>());
    case json::value_t::number_integer:
      return Value::Int(j.get<int64_t>());
    case json::value_t::number_unsigned:
      if (j.get<uint64_t>() >
          static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return absl::InvalidArgumentError("integer out of range");
      }
      return Value::Int(static_cast<int64_t>(j.get<uint64_t>()));
    case json::value_t::number_float:
      return Value::Float(j.get<double>());
    case json::value_t::string:
      return untrusted ? Value::String(Untrusted(j.get<std::string>()))
                       : Value::String(j.get<std::string>());
    case json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const json& item : j) {
        absl::StatusOr<Value> v = Convert(item, untrusted, depth + 1);
        if (!v.ok()) return v.status();
        items.push_back(*std::move(v));
      }
      return Value::List(std::move(items));
    }
    case json::value_t::object: {
      std::vector<std::pair<Value, Value>> items;
      items.reserve(j.size());
      for (const auto& [key, item] : j.items()) {
        absl::StatusOr<Value> v = Convert(item, untrusted, depth + 1);
        if (!v.ok()) return v.status();
        Value k =
            untrusted ? Value::String(Untrusted(key)) : Value::String(key);
        items.emplace_back(std::move(k), *std::move(v));
      }
      return Value::Dict(std::move(items));
    }
    default:
      return absl::InvalidArgumentError("unsupported JSON value");
  }
}

}  // namespace

absl::StatusOr<Value> FromJson(const json& j, bool untrusted) {
  return Convert(j, untrusted, 0);
}

}  // namespace seqboat::jinja
