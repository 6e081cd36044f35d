#include "server/engine_gauges.h"

#include <string>

namespace seqboat {
namespace {

// The prefix cache's disk tier (--prefix_cache_dir); zeros without one.
void AddDiskGauges(MetricsRegistry* registry, const Engine* engine) {
  using Stats = SnapshotDiskStats;
  auto read = [engine](int64_t Stats::*field) {
    return [engine, field] {
      return static_cast<double>(engine->Stats().prefix_cache_disk_stats.*
                                 field);
    };
  };
  const std::string p = "seqboat_prefix_cache_disk_";
  registry->AddCounterReading(p + "hits_total",
                              "Snapshots read back from the disk tier.",
                              read(&Stats::hits));
  registry->AddCounterReading(
      p + "hit_tokens_total",
      "Prompt tokens of the snapshots read back from the disk tier.",
      read(&Stats::hit_tokens));
  registry->AddCounterReading(p + "read_bytes_total",
                              "Bytes of snapshot files read back.",
                              read(&Stats::read_bytes));
  registry->AddCounterReading(p + "writes_total",
                              "Snapshot files written to the disk tier.",
                              read(&Stats::writes));
  registry->AddCounterReading(p + "written_bytes_total",
                              "Bytes of snapshot files written.",
                              read(&Stats::written_bytes));
  registry->AddCounterReading(
      p + "dropped_total",
      "Evicted snapshots not written: the writer's queue was full.",
      read(&Stats::dropped));
  registry->AddCounterReading(p + "write_errors_total",
                              "Snapshot files that failed to write.",
                              read(&Stats::write_errors));
  registry->AddCounterReading(
      p + "evictions_total",
      "Snapshot files deleted to stay within the disk budget.",
      read(&Stats::evicted));
  registry->AddGauge(p + "bytes", "Bytes of snapshot files held.",
                     read(&Stats::bytes));
  registry->AddGauge(p + "files", "Snapshot files held.", read(&Stats::files));
  registry->AddGauge(p + "budget_bytes",
                     "The disk tier's byte budget (0: no disk tier).",
                     read(&Stats::budget_bytes));
  registry->AddLabelledReadings(
      p + "refused_total",
      "Snapshot files refused and deleted, by reason (truncated, checksum, "
      "format, identity: another model or state layout).",
      "counter", "reason", [engine] {
        const SnapshotDiskStats st = engine->Stats().prefix_cache_disk_stats;
        MetricsRegistry::LabelledReadings out;
        for (int r = 1; r < kSnapshotRefusalKinds; ++r) {
          out.push_back({SnapshotRefusalName(static_cast<SnapshotRefusal>(r)),
                         static_cast<double>(st.refused[r])});
        }
        return out;
      });
}

// Snapshots asked of other replicas (--prefix_cache_peers); zeros without.
void AddPeerFetchGauges(MetricsRegistry* registry, const Engine* engine) {
  using Stats = PeerFetchStats;
  auto read = [engine](int64_t Stats::*field) {
    return [engine, field] {
      return static_cast<double>(engine->Stats().peer_fetch.*field);
    };
  };
  const std::string p = "seqboat_prefix_cache_peer_";
  registry->AddCounterReading(p + "fetches_total",
                              "Requests that asked the peers for a snapshot.",
                              read(&Stats::fetches));
  registry->AddCounterReading(
      p + "hits_total", "Peers' snapshots imported into the prefix cache.",
      read(&Stats::hits));
  registry->AddCounterReading(p + "hit_tokens_total",
                              "Prompt tokens of the peers' snapshots imported.",
                              read(&Stats::hit_tokens));
  registry->AddCounterReading(p + "received_bytes_total",
                              "Bytes of the peers' snapshots received.",
                              read(&Stats::bytes));
  registry->AddCounterReading(p + "misses_total",
                              "Fetches no peer had a longer snapshot for.",
                              read(&Stats::misses));
  registry->AddCounterReading(
      p + "failed_total",
      "Fetches no peer answered in time (down, slow, or too many fetches).",
      read(&Stats::failed));
  registry->AddLabelledReadings(
      p + "refused_total",
      "Peers' snapshots refused, by reason (truncated: short or oversize, "
      "checksum, format: not an answer to the question, identity: another "
      "model or state layout).",
      "counter", "reason", [engine] {
        const PeerFetchStats st = engine->Stats().peer_fetch;
        MetricsRegistry::LabelledReadings out;
        for (int r = 1; r < kSnapshotRefusalKinds; ++r) {
          out.push_back({SnapshotRefusalName(static_cast<SnapshotRefusal>(r)),
                         static_cast<double>(st.refused[r])});
        }
        return out;
      });
}

}  // namespace

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
  // Prefix reuse, in vLLM's names and units: prompt tokens looked up and
  // tokens served from a snapshot (hit rate = hits / queries).
  registry->AddCounterReading(
      "seqboat_prefix_cache_queries_total",
      "Prompt tokens looked up in the prefix cache.", [engine] {
        return static_cast<double>(engine->Stats().prefix_cache.queries);
      });
  registry->AddCounterReading(
      "seqboat_prefix_cache_hits_total",
      "Prompt tokens restored from a prefix-state snapshot.", [engine] {
        return static_cast<double>(engine->Stats().prefix_cache.hits);
      });
  registry->AddCounterReading(
      "seqboat_prefix_cache_evictions_total",
      "Snapshots evicted to stay within the budget.", [engine] {
        return static_cast<double>(engine->Stats().prefix_cache.evicted);
      });
  registry->AddGauge(
      "seqboat_prefix_cache_bytes",
      "Host bytes held by prefix-state snapshots.", [engine] {
        return static_cast<double>(engine->Stats().prefix_cache.bytes);
      });
  registry->AddGauge(
      "seqboat_prefix_cache_budget_bytes",
      "The prefix cache's byte budget (0: off).", [engine] {
        return static_cast<double>(engine->Stats().prefix_cache.budget_bytes);
      });
  registry->AddGauge(
      "seqboat_prefix_cache_snapshots", "Prefix-state snapshots held.",
      [engine] {
        return static_cast<double>(engine->Stats().prefix_cache.snapshots);
      });
  // Speculative decoding, as vLLM's spec_decode metrics (per method, each
  // method that drafts, zeros included): rounds that verified a draft, tokens
  // drafted and accepted (acceptance rate = accepted / draft tokens), and
  // rounds by how many draft tokens they took (the acceptance lengths).
  auto per_method = [engine](int64_t SpeculationCounts::*field) {
    return [engine, field] {
      const EngineStats stats = engine->Stats();
      MetricsRegistry::LabelledReadings out;
      for (SpeculativeMethod m :
           {SpeculativeMethod::kPromptLookup, SpeculativeMethod::kDraftModel,
            SpeculativeMethod::kMtp}) {
        const std::string name(SpeculativeMethodName(m));
        auto it = stats.speculation_by_method.find(name);
        out.push_back({name, it == stats.speculation_by_method.end()
                                 ? 0.0
                                 : static_cast<double>(it->second.*field)});
      }
      return out;
    };
  };
  registry->AddLabelledReadings("seqboat_spec_decode_num_drafts_total",
                                "Speculative rounds that verified a draft.",
                                "counter", "method",
                                per_method(&SpeculationCounts::drafts));
  registry->AddLabelledReadings("seqboat_spec_decode_num_draft_tokens_total",
                                "Tokens drafted for speculative decoding.",
                                "counter", "method",
                                per_method(&SpeculationCounts::draft_tokens));
  registry->AddLabelledReadings(
      "seqboat_spec_decode_num_accepted_tokens_total",
      "Draft tokens the model's own draws matched.", "counter", "method",
      per_method(&SpeculationCounts::accepted_tokens));
  registry->AddGauge(
      "seqboat_spec_decode_max_batch",
      "Speculative rounds run while at most this many sequences run "
      "(measured at start-up with --speculative_max_batch=auto).",
      [engine] {
        return static_cast<double>(engine->Stats().speculative_max_batch);
      });
  registry->AddLabelledReadings(
      "seqboat_spec_decode_rounds_by_accepted_total",
      "Speculative rounds by the number of draft tokens they took.", "counter",
      "accepted", [engine] {
        MetricsRegistry::LabelledReadings out;
        const std::vector<int64_t> per_round =
            engine->Stats().speculation.accepted_per_round;
        for (size_t a = 0; a < per_round.size(); ++a) {
          out.push_back({std::to_string(a), static_cast<double>(per_round[a])});
        }
        return out;
      });
  AddDiskGauges(registry, engine);
  AddPeerFetchGauges(registry, engine);
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
