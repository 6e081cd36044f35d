// Gauges of the engine's state, read from Engine::Stats() at scrape time so
// they are never stale and nothing has to push them.
#ifndef SEQBOAT_SERVER_ENGINE_GAUGES_H_
#define SEQBOAT_SERVER_ENGINE_GAUGES_H_

#include "engine/engine.h"
#include "server/metrics.h"

namespace seqboat {

// Gauges read from `engine` at scrape time: running and waiting requests,
// used and free state slots, the last step's batch, draining.
// `engine` must outlive `registry`'s last Render().
void AddEngineGauges(MetricsRegistry* registry, const Engine* engine);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_ENGINE_GAUGES_H_
