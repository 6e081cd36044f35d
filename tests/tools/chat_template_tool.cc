// Renders templates for tests/python/chat_template, which compares the
// output with transformers'. Reads one JSON object from stdin:
//
//   {"cases": [
//     {"template": "...", "variables": {...}},          // a bare template
//     {"tokenizer_config": {...}, "messages": [...],    // a chat template
//      "add_generation_prompt": true, "tools": [...],   // tools, kwargs:
//      "kwargs": {"enable_thinking": false}}            //   optional
//   ], "now": 1700000000}                               // strftime_now's time
//
// and writes {"results": [...]} to stdout, one per case: {"text": "...",
// "untrusted": [[begin, end], ...]} (byte ranges from the messages), or
// {"error": "...", "code": "ABORTED"} (the status code's name). Exit status
// 1 only when the input itself cannot be read.
#include <iostream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "base/json_reader.h"
#include "server/chat_template.h"
#include "server/jinja/json_value.h"
#include "server/jinja/template.h"
#include "server/jinja/value.h"

namespace {

// Ordered, so that dicts keep the order the test wrote them in.
using json = nlohmann::ordered_json;
using seqboat::jinja::Value;

json Error(const absl::Status& status) {
  return json{{"error", std::string(status.message())},
              {"code", absl::StatusCodeToString(status.code())}};
}

json Result(const absl::StatusOr<seqboat::jinja::Str>& text) {
  if (!text.ok()) return Error(text.status());
  json spans = json::array();
  for (const seqboat::jinja::Span& span : text->untrusted) {
    spans.push_back({span.begin, span.end});
  }
  return json{{"text", text->text}, {"untrusted", spans}};
}

json RunCase(const json& c, absl::Time now) {
  if (c.contains("template")) {
    absl::StatusOr<std::unique_ptr<seqboat::jinja::Template>> t =
        seqboat::jinja::Template::Parse(c["template"].get<std::string>());
    if (!t.ok()) return Error(t.status());
    seqboat::jinja::Variables variables;
    if (c.contains("variables")) {
      for (const auto& [key, value] : c["variables"].items()) {
        absl::StatusOr<Value> v = seqboat::jinja::FromJson(value, false);
        if (!v.ok()) return Error(v.status());
        variables.emplace_back(key, *std::move(v));
      }
    }
    return Result((*t)->Render(variables, now));
  }
  absl::StatusOr<std::unique_ptr<seqboat::ChatTemplate>> t =
      seqboat::ChatTemplate::FromTokenizerConfig(c["tokenizer_config"].dump(),
                                                 "tokenizer_config.json");
  if (!t.ok()) return Error(t.status());
  std::vector<seqboat::ChatMessage> messages;
  for (const json& m : c["messages"]) {
    seqboat::ChatMessage message;
    message.role = m["role"].get<std::string>();
    message.content = m["content"].get<std::string>();
    for (const auto& [key, field] : m.items()) {
      if (key == "name") {
        message.name = field.get<std::string>();
      } else if (key != "role" && key != "content") {
        message.extra[key] = field;
      }
    }
    messages.push_back(std::move(message));
  }
  seqboat::ChatOptions options;
  options.add_generation_prompt = c.value("add_generation_prompt", true);
  if (c.contains("tools")) options.tools = c["tools"];
  if (c.contains("kwargs")) options.kwargs = c["kwargs"];
  return Result((*t)->Render(messages, options, now));
}

}  // namespace

int main() {
  const std::string input((std::istreambuf_iterator<char>(std::cin)),
                          std::istreambuf_iterator<char>());
  if (absl::Status s = seqboat::CheckJsonDepth(input); !s.ok()) {
    std::cerr << s.message() << "\n";
    return 1;
  }
  json request = json::parse(input, nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded() || !request.is_object()) {
    std::cerr << "stdin: not a JSON object\n";
    return 1;
  }
  const absl::Time now =
      request.contains("now")
          ? absl::FromUnixSeconds(request["now"].get<int64_t>())
          : absl::Now();
  json results = json::array();
  for (const json& c : request["cases"]) results.push_back(RunCase(c, now));
  std::cout << json{{"results", results}}.dump(-1, ' ', false,
                                               json::error_handler_t::replace)
            << "\n";
  return 0;
}
