#include "clients/load/result_json.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace seqboat {
namespace load {
namespace {

void PutMs(nlohmann::json& out, const std::string& metric,
           const Distribution& d) {
  out["mean_" + metric + "_ms"] = d.mean * 1e3;
  out["std_" + metric + "_ms"] = d.std * 1e3;
  out["median_" + metric + "_ms"] = d.p50 * 1e3;
  out["p90_" + metric + "_ms"] = d.p90 * 1e3;
  out["p99_" + metric + "_ms"] = d.p99 * 1e3;
  out["min_" + metric + "_ms"] = d.min * 1e3;
  out["max_" + metric + "_ms"] = d.max * 1e3;
  out["count_" + metric] = d.count;
}

}  // namespace

nlohmann::json ResultJson(const nlohmann::json& config, const Summary& s,
                          const std::vector<RequestRecord>* per_request) {
  nlohmann::json out;
  out["config"] = config;
  out["completed"] = s.completed;
  out["failed"] = s.failed;
  out["duration"] = s.duration_s;
  out["total_input_tokens"] = s.total_input_tokens;
  out["total_output_tokens"] = s.total_output_tokens;
  out["request_throughput"] = s.request_throughput;
  out["output_throughput"] = s.output_throughput;
  out["total_token_throughput"] = s.total_token_throughput;
  PutMs(out, "ttft", s.ttft_s);
  PutMs(out, "tpot", s.tpot_s);
  PutMs(out, "itl", s.itl_s);
  PutMs(out, "e2el", s.e2el_s);
  out["status_counts"] = s.status_counts;
  if (per_request != nullptr) {
    nlohmann::json list = nlohmann::json::array();
    for (const RequestRecord& r : *per_request) {
      const RequestTimings t = TimingsOf(r);
      int64_t received = 0;
      for (int64_t n : r.chunk_tokens) received += n;
      list.push_back({{"request_id", r.request_id},
                      {"status", r.status},
                      {"prompt_tokens", r.prompt_tokens},
                      {"output_tokens", r.output_tokens},
                      {"cached_prompt_tokens", r.cached_prompt_tokens},
                      {"received_tokens", received},
                      {"start_s", r.start},
                      {"ttft_s", t.ttft},
                      {"e2el_s", t.e2el}});
    }
    out["requests"] = list;
  }
  return out;
}

std::string SummaryTable(const Summary& s) {
  std::string out = "============ Serving Benchmark Result ============\n";
  auto line = [&out](const char* name, const std::string& value) {
    absl::StrAppendFormat(&out, "%-40s %s\n", name, value);
  };
  line("Successful requests:", absl::StrCat(s.completed));
  line("Failed requests:", absl::StrCat(s.failed));
  for (const auto& [code, n] : s.status_counts) {
    if (code != "OK") line(("  " + code + ":").c_str(), absl::StrCat(n));
  }
  line("Benchmark duration (s):", absl::StrFormat("%.2f", s.duration_s));
  line("Total input tokens:", absl::StrCat(s.total_input_tokens));
  line("Total generated tokens:", absl::StrCat(s.total_output_tokens));
  line("Request throughput (req/s):",
       absl::StrFormat("%.2f", s.request_throughput));
  line("Output token throughput (tok/s):",
       absl::StrFormat("%.2f", s.output_throughput));
  line("Total Token throughput (tok/s):",
       absl::StrFormat("%.2f", s.total_token_throughput));
  auto block = [&](const char* title, const char* name, const Distribution& d) {
    absl::StrAppendFormat(&out, "%s\n", title);
    line(absl::StrFormat("Mean %s (ms):", name).c_str(),
         absl::StrFormat("%.2f", d.mean * 1e3));
    line(absl::StrFormat("Median %s (ms):", name).c_str(),
         absl::StrFormat("%.2f", d.p50 * 1e3));
    line(absl::StrFormat("P90 %s (ms):", name).c_str(),
         absl::StrFormat("%.2f", d.p90 * 1e3));
    line(absl::StrFormat("P99 %s (ms):", name).c_str(),
         absl::StrFormat("%.2f", d.p99 * 1e3));
  };
  block("---------------Time to First Token----------------", "TTFT", s.ttft_s);
  block("-----Time per Output Token (excl. 1st token)------", "TPOT", s.tpot_s);
  block("---------------Inter-token Latency----------------", "ITL", s.itl_s);
  block("----------------End-to-end Latency----------------", "E2EL", s.e2el_s);
  out += "==================================================\n";
  return out;
}

nlohmann::json TurnsJson(const std::vector<TurnSummary>& turns) {
  nlohmann::json list = nlohmann::json::array();
  for (const TurnSummary& t : turns) {
    nlohmann::json j;
    j["turn"] = t.turn;
    j["completed"] = t.completed;
    j["failed"] = t.failed;
    PutMs(j, "ttft", t.ttft_s);
    PutMs(j, "e2el", t.e2el_s);
    j["mean_prompt_tokens"] = t.prompt_tokens.mean;
    j["min_prompt_tokens"] = static_cast<int64_t>(t.prompt_tokens.min);
    j["max_prompt_tokens"] = static_cast<int64_t>(t.prompt_tokens.max);
    j["mean_cached_prompt_tokens"] = t.cached_prompt_tokens.mean;
    j["min_cached_prompt_tokens"] =
        static_cast<int64_t>(t.cached_prompt_tokens.min);
    j["max_cached_prompt_tokens"] =
        static_cast<int64_t>(t.cached_prompt_tokens.max);
    j["cached_fraction"] = t.cached_fraction;
    list.push_back(std::move(j));
  }
  return list;
}

std::string TurnTable(const std::vector<TurnSummary>& turns) {
  std::string out =
      "=================================== Chat turns "
      "===================================\n";
  absl::StrAppendFormat(&out, "%4s %5s %5s %10s %10s %9s %9s %9s %9s %9s\n",
                        "turn", "ok", "fail", "prompt", "cached", "TTFT p50",
                        "TTFT p90", "TTFT mean", "E2E p50", "E2E mean");
  absl::StrAppendFormat(&out, "%4s %5s %5s %10s %10s %9s %9s %9s %9s %9s\n", "",
                        "", "", "tokens", "tokens", "ms", "ms", "ms", "ms",
                        "ms");
  for (const TurnSummary& t : turns) {
    absl::StrAppendFormat(
        &out, "%4d %5d %5d %10.0f %10.0f %9.2f %9.2f %9.2f %9.2f %9.2f\n",
        t.turn, t.completed, t.failed, t.prompt_tokens.mean,
        t.cached_prompt_tokens.mean, t.ttft_s.p50 * 1e3, t.ttft_s.p90 * 1e3,
        t.ttft_s.mean * 1e3, t.e2el_s.p50 * 1e3, t.e2el_s.mean * 1e3);
  }
  out +=
      "(prompt and cached tokens: means over the conversations that completed "
      "the turn)\n";
  return out;
}

}  // namespace load
}  // namespace seqboat
