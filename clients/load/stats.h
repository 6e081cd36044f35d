// Benchmark statistics over recorded stream timings, with the definitions of
// vLLM's benchmark_serving so figures compare across servers:
//   TTFT  first message carrying tokens - request start
//   ITL   gap between successive messages carrying tokens; a message with
//         several tokens (coalesced by the server) is still one gap, as vLLM
//         counts one ITL sample per streamed chunk
//   E2E   last message - request start
//   TPOT  (E2E - TTFT) / (output_tokens - 1), for output_tokens > 1
// Only successful requests enter the latency and throughput figures; failed
// ones are counted by gRPC status code. Percentiles interpolate linearly
// between order statistics (numpy.percentile's default). Pure arithmetic: no
// clocks, no I/O.
#ifndef SEQBOAT_CLIENTS_LOAD_STATS_H_
#define SEQBOAT_CLIENTS_LOAD_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace seqboat {
namespace load {

// One request as the client saw it. Times are seconds on one monotonic clock
// (any origin).
struct RequestRecord {
  std::string request_id;
  std::string status;  // gRPC status code name, "OK" on success
  double start = 0;    // when the call was started
  double end = 0;      // the last message (or the end of the call if none)
  // Arrival time and token count of each message that carried tokens.
  std::vector<double> chunk_times;
  std::vector<int64_t> chunk_tokens;
  int64_t prompt_tokens = 0;
  // Tokens generated (the server's usage figure; if absent, the sum of
  // chunk_tokens).
  int64_t output_tokens = 0;
  // Of prompt_tokens, those the server did not compute again (a prefix-cache
  // hit), from its usage figure; 0 when it reports none.
  int64_t cached_prompt_tokens = 0;

  bool ok() const { return status == "OK"; }
};

struct Distribution {
  int64_t count = 0;
  double mean = 0;
  double std = 0;  // population standard deviation, as numpy.std
  double min = 0;
  double p50 = 0;  // the median
  double p90 = 0;
  double p99 = 0;
  double max = 0;
};

struct Summary {
  int64_t completed = 0;  // successful requests
  int64_t failed = 0;
  double duration_s = 0;
  int64_t total_input_tokens = 0;   // of successful requests
  int64_t total_output_tokens = 0;  // of successful requests
  double request_throughput = 0;    // completed / duration
  double output_throughput = 0;     // output tokens / duration
  double total_token_throughput = 0;
  Distribution ttft_s, tpot_s, itl_s, e2el_s;
  std::map<std::string, int64_t> status_counts;  // every request, by code
};

// numpy.percentile(values, q) with linear interpolation; `sorted` ascending,
// q in [0, 100]. 0 for an empty input.
double Percentile(const std::vector<double>& sorted, double q);

Distribution Describe(std::vector<double> values);

// `duration_s` is the benchmark's wall time (first start to last end);
// throughputs are 0 when it is not positive.
Summary Summarize(const std::vector<RequestRecord>& records, double duration_s);

// TTFT, ITL samples and TPOT of one successful record (for per-request
// output); ttft is negative when no message carried tokens.
struct RequestTimings {
  double ttft = -1;
  double e2el = 0;
  double tpot = -1;  // -1 when output_tokens <= 1
  std::vector<double> itl;
};
RequestTimings TimingsOf(const RequestRecord& record);

}  // namespace load
}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_LOAD_STATS_H_
