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
  // SeqBoat blocks: tokens seen and tokens whose attention unit ran; the
  // activation rate of a block is the ratio of their rates.
  auto per_block = [engine](const std::string& counter) {
    return [engine, counter] {
      MetricsRegistry::LabelledReadings out;
      for (const BlockCounter& c : engine->Stats().block_counters) {
        if (c.name == counter) {
          out.push_back(
              {std::to_string(c.block), static_cast<double>(c.value)});
        }
      }
      return out;
    };
  };
  registry->AddLabelledReadings("seqboat_block_tokens_total",
                                "Tokens through a SeqBoat block.", "counter",
                                "block", per_block("seqboat.tokens"));
  registry->AddLabelledReadings(
      "seqboat_block_gau_activated_tokens_total",
      "Tokens for which a SeqBoat block ran its gated attention unit.",
      "counter", "block", per_block("seqboat.gau_activated"));
}

}  // namespace seqboat
