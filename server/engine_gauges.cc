#include "server/engine_gauges.h"

namespace seqboat {

void AddEngineGauges(MetricsRegistry* registry, const Engine* engine) {
  const double slots = engine->options().max_slots;
  registry->AddGauge("seqboat_num_requests_running",
                     "Requests holding a state slot.",
                     [engine] { return engine->Stats().running; });
  registry->AddGauge("seqboat_num_requests_waiting",
                     "Requests queued for a state slot.",
                     [engine] { return engine->Stats().waiting; });
  registry->AddGauge("seqboat_state_slots_free", "State slots not in use.",
                     [engine] { return engine->Stats().free_slots; });
  registry->AddGauge(
      "seqboat_state_slots_used", "State slots in use.",
      [engine, slots] { return slots - engine->Stats().free_slots; });
  registry->AddGauge("seqboat_state_slots_total", "State slots (max_slots).",
                     [slots] { return slots; });
  registry->AddGauge(
      "seqboat_engine_last_step_batch_size",
      "Sequences in the most recent engine step.", [engine] {
        return static_cast<double>(engine->Stats().last_step_batch);
      });
  registry->AddGauge("seqboat_draining", "1 while draining after SIGTERM.",
                     [engine] { return engine->Stats().draining ? 1.0 : 0.0; });
}

}  // namespace seqboat
