// The load client's result file: the run's configuration, the summary with
// vLLM's field names (mean_ttft_ms, p99_itl_ms, ...), status counts and,
// optionally, one entry per request; for a chat run also per-turn figures.
#ifndef SEQBOAT_CLIENTS_LOAD_RESULT_JSON_H_
#define SEQBOAT_CLIENTS_LOAD_RESULT_JSON_H_

#include <string>
#include <vector>

#include "clients/load/chat.h"
#include "clients/load/stats.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace load {

// `config` is stored as given under "config".
nlohmann::json ResultJson(const nlohmann::json& config, const Summary& summary,
                          const std::vector<RequestRecord>* per_request);

// The human-readable table printed at the end of a run.
std::string SummaryTable(const Summary& summary);

// A chat run's per-turn figures, one object per turn index with the summary's
// naming: turn, completed, failed, {mean,median,p90,...}_{ttft,e2el}_ms,
// {mean,min,max}_prompt_tokens, {mean,min,max}_cached_prompt_tokens,
// cached_fraction. Stored by the caller under "turns".
nlohmann::json TurnsJson(const std::vector<TurnSummary>& turns);

// The per-turn table printed after a chat run's summary.
std::string TurnTable(const std::vector<TurnSummary>& turns);

}  // namespace load
}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_LOAD_RESULT_JSON_H_
