// The load client's result file: the run's configuration, the summary with
// vLLM's field names (mean_ttft_ms, p99_itl_ms, ...), status counts and,
// optionally, one entry per request.
#ifndef SEQBOAT_CLIENTS_LOAD_RESULT_JSON_H_
#define SEQBOAT_CLIENTS_LOAD_RESULT_JSON_H_

#include <string>
#include <vector>

#include "clients/load/stats.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace load {

// `config` is stored as given under "config".
nlohmann::json ResultJson(const nlohmann::json& config, const Summary& summary,
                          const std::vector<RequestRecord>* per_request);

// The human-readable table printed at the end of a run.
std::string SummaryTable(const Summary& summary);

}  // namespace load
}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_LOAD_RESULT_JSON_H_
