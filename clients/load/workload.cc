#include "clients/load/workload.h"

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace load {
namespace {

absl::Status LineError(int line, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("prompts line ", line, ": ", what));
}

int32_t DrawLength(int32_t len, double ratio, std::mt19937_64& rng) {
  const int32_t lo =
      std::max<int32_t>(1, static_cast<int32_t>(std::floor(len * (1 - ratio))));
  const int32_t hi = std::max<int32_t>(
      lo, static_cast<int32_t>(std::floor(len * (1 + ratio))));
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
}

}  // namespace

absl::StatusOr<std::vector<Prompt>> ParsePromptsJsonl(const std::string& data) {
  std::vector<Prompt> prompts;
  std::istringstream in(data);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      return LineError(number, "not a JSON object");
    }
    Prompt p;
    const bool has_text = j.contains("text");
    const bool has_ids = j.contains("token_ids");
    if (has_text == has_ids) {
      return LineError(number, "needs exactly one of \"text\", \"token_ids\"");
    }
    if (has_text) {
      if (!j["text"].is_string())
        return LineError(number, "text: not a string");
      p.text = j["text"].get<std::string>();
    } else {
      if (!j["token_ids"].is_array() || j["token_ids"].empty()) {
        return LineError(number, "token_ids: not a non-empty array");
      }
      for (const auto& id : j["token_ids"]) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
          return LineError(number, "token_ids: not all non-negative int32");
        }
        p.token_ids.push_back(id.get<int32_t>());
      }
    }
    if (j.contains("max_new_tokens")) {
      const auto& m = j["max_new_tokens"];
      if (!m.is_number_integer() || m.get<int64_t>() < 1 ||
          m.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return LineError(number, "max_new_tokens: not a positive int32");
      }
      p.max_new_tokens = m.get<int32_t>();
    }
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) return absl::InvalidArgumentError("no prompts");
  return prompts;
}

absl::StatusOr<std::vector<Prompt>> LoadPromptsJsonl(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buffer;
  buffer << file.rdbuf();
  absl::StatusOr<std::vector<Prompt>> prompts = ParsePromptsJsonl(buffer.str());
  if (!prompts.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", prompts.status().message()));
  }
  return prompts;
}

absl::Status ValidateSyntheticSpec(const SyntheticSpec& spec) {
  if (spec.input_len < 1 || spec.output_len < 1) {
    return absl::InvalidArgumentError(
        "--input_len and --output_len must be >= 1");
  }
  if (!(spec.range_ratio >= 0 && spec.range_ratio < 1)) {
    return absl::InvalidArgumentError("--range_ratio must be in [0, 1)");
  }
  if (spec.vocab_size < 1) {
    return absl::InvalidArgumentError("vocabulary size must be >= 1");
  }
  return absl::OkStatus();
}

Prompt SyntheticPrompt(const SyntheticSpec& spec, int64_t index) {
  // One generator per request keeps request i's prompt independent of how
  // many requests ran before it (a duration-bound run stops anywhere).
  std::seed_seq seq{static_cast<uint32_t>(spec.seed),
                    static_cast<uint32_t>(spec.seed >> 32),
                    static_cast<uint32_t>(index),
                    static_cast<uint32_t>(static_cast<uint64_t>(index) >> 32)};
  std::mt19937_64 rng(seq);
  Prompt p;
  const int32_t in_len = DrawLength(spec.input_len, spec.range_ratio, rng);
  p.max_new_tokens = DrawLength(spec.output_len, spec.range_ratio, rng);
  std::uniform_int_distribution<int32_t> id(0, spec.vocab_size - 1);
  p.token_ids.reserve(static_cast<size_t>(in_len));
  for (int32_t i = 0; i < in_len; ++i) p.token_ids.push_back(id(rng));
  return p;
}

PoissonArrivals::PoissonArrivals(double rate, uint64_t seed)
    : rate_(rate), rng_(seed) {}

double PoissonArrivals::Next() {
  if (std::isinf(rate_) || rate_ <= 0) return t_;
  t_ += std::exponential_distribution<double>(rate_)(rng_);
  return t_;
}

}  // namespace load
}  // namespace seqboat
