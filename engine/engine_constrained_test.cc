// Constrained decoding through the engine (Request::constraint): seeded
// temperature-1 generations on a flattened tiny model (every draw matters)
// must match their constraint on every sample, on the host path and through
// a backend that samples on its device; greedy ones must be the same both
// ways; n > 1, prefix reuse, refusal of bad constraints and cancellation.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/testing/forwarding_backend.h"
#include "engine/engine.h"
#include "engine/grammar/grammar.h"
#include "engine/testing/event_collector.h"
#include "engine/testing/flat_model.h"
#include "engine/testing/pipelined_cpu.h"
#include "gtest/gtest.h"
#include "kernels/cpu/cpu_backend.h"
#include "nlohmann/json.hpp"

namespace seqboat {
namespace {

constexpr char kTinyMamba[] = "tests/data/tiny_mamba";
constexpr char kTinyHybrid[] = "tests/data/tiny_hybrid";

// The CPU backend claiming to sample on its device (SampleRows with the
// host reference), counting the rows it samples and those with a mask.
class DeviceSamplingCpu final : public ForwardingBackend {
 public:
  DeviceSamplingCpu(std::atomic<int64_t>* rows, std::atomic<int64_t>* masked)
      : ForwardingBackend(MakeCpuBackend(1)), rows_(rows), masked_(masked) {}
  std::string name() const override { return "cpu-device-sampling"; }
  bool SamplesOnDevice() const override { return true; }
  absl::Status SampleRows(const SampleRowsParams& p) override {
    *rows_ += p.m;
    for (int j = 0; j < p.m; ++j) *masked_ += p.rows[j].mask_row >= 0;
    return inner().SampleRows(p);
  }

 private:
  std::atomic<int64_t>* rows_;
  std::atomic<int64_t>* masked_;
};

Constraint Regex(std::string text) {
  return {ConstraintKind::kRegex, std::move(text), {}};
}
Constraint Choice(std::vector<std::string> choices) {
  return {ConstraintKind::kChoice, "", std::move(choices)};
}
Constraint Schema(std::string text) {
  return {ConstraintKind::kJsonSchema, std::move(text), {}};
}
Constraint Ebnf(std::string text) {
  return {ConstraintKind::kGrammar, std::move(text), {}};
}

constexpr char kSchema[] = R"({"type": "object",
  "properties": {"ok": {"type": "boolean"},
                 "n": {"type": "integer", "minimum": 0, "maximum": 99},
                 "tag": {"enum": ["a", "bc"]}},
  "required": ["ok", "n", "tag"], "additionalProperties": false})";

// Sums of one or more numbers in parentheses.
constexpr char kEbnf[] =
    "root ::= \"(\" num (\"+\" num)* \")\"\nnum ::= [0-9] | [1-9] [0-9]";

struct Job {
  Constraint constraint;
  float temperature = 1.0f;
  uint64_t seed = 0;
  int32_t n = 1;
  int32_t max_new_tokens = 120;
  int32_t min_new_tokens = 0;
  std::vector<int32_t> prompt = {10, 20, 30, 40};
  std::vector<int32_t> stop_token_ids;
  bool constrained = true;  // false: `constraint` is not sent
};

struct Seq {
  std::vector<int32_t> tokens;
  std::string text;
  FinishReason finish = FinishReason::kNone;
  int32_t cached = 0;
};

// Where the engine samples: on the host, "on the device" (SampleRows), or
// on a device that pipelines steps.
enum class Path { kHost, kDevice, kPipelined };

class Runner {
 public:
  explicit Runner(const std::string& model, Path path = Path::kHost,
                  int64_t prefix_cache_bytes = 0) {
    const bool device = path != Path::kHost;
    EngineOptions o;
    o.model_dir = model;
    o.max_slots = 6;
    o.step_token_budget = 32;
    o.prefix_cache_bytes = prefix_cache_bytes;
    // Several fillers share the masks out on one path, one on the other.
    o.grammar_mask_threads = device ? 3 : 1;
    std::unique_ptr<Backend> backend;
    if (path == Path::kDevice) {
      backend = std::make_unique<DeviceSamplingCpu>(&rows_, &masked_);
    } else if (path == Path::kPipelined) {
      backend = std::make_unique<PipelinedCpu>();
    } else {
      backend = MakeCpuBackend(1);
    }
    auto engine = Engine::Create(o, std::move(backend));
    EXPECT_TRUE(engine.ok()) << engine.status();
    if (engine.ok()) engine_ = *std::move(engine);
  }

  // Runs every job at once; each job's sequences, in index order.
  std::vector<std::vector<Seq>> Run(const std::vector<Job>& jobs) {
    std::vector<std::unique_ptr<EventCollector>> collectors;
    std::vector<std::vector<Seq>> out(jobs.size());
    if (engine_ == nullptr) return out;
    for (const Job& job : jobs) {
      collectors.push_back(std::make_unique<EventCollector>());
      collectors.back()->n = job.n;
      Request r;
      r.prompt = job.prompt;
      r.n = job.n;
      r.sampling.temperature = job.temperature;
      r.sampling.seed = job.seed;
      r.stopping.max_new_tokens = job.max_new_tokens;
      r.stopping.min_new_tokens = job.min_new_tokens;
      r.stopping.stop_token_ids = job.stop_token_ids;
      if (job.constrained) r.constraint = job.constraint;
      r.sink = collectors.back()->Sink();
      const absl::Status s = engine_->Submit(std::move(r));
      EXPECT_TRUE(s.ok()) << s;
      if (!s.ok()) return out;
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      EventCollector& c = *collectors[i];
      c.done.get_future().get();
      std::lock_guard<std::mutex> lock(c.mu);
      EXPECT_FALSE(c.bad_index || c.after_final);
      for (int k = 0; k < jobs[i].n; ++k) {
        EXPECT_TRUE(c.final_of[k].status.ok()) << c.final_of[k].status;
        out[i].push_back({c.tokens_of[k], c.text_of[k], c.final_of[k].finish,
                          c.final_of[k].cached_prompt_tokens});
      }
    }
    return out;
  }

  Engine& engine() { return *engine_; }
  int64_t rows() const { return rows_.load(); }
  int64_t masked() const { return masked_.load(); }

 private:
  std::atomic<int64_t> rows_{0}, masked_{0};
  std::unique_ptr<Engine> engine_;
};

// Whether `text` is a whole text of the constraint (checked without the
// grammar library: each kind's own definition).
bool Matches(const Constraint& c, const std::string& text) {
  switch (c.kind) {
    case ConstraintKind::kChoice:
      return std::set<std::string>(c.choices.begin(), c.choices.end())
                 .count(text) > 0;
    case ConstraintKind::kRegex:
      return std::regex_match(text, std::regex(c.text));
    case ConstraintKind::kGrammar:
      return std::regex_match(
          text, std::regex(R"(\((\d|[1-9]\d)(\+(\d|[1-9]\d))*\))"));
    case ConstraintKind::kAnyJson:
      // JSON's grammar allows exponents past a double's range, which the
      // parser refuses as overflow: they are checked as digits only.
      return nlohmann::json::accept(
          std::regex_replace(text, std::regex(R"([eE][-+]?[0-9]+)"), "e0"));
    case ConstraintKind::kJsonSchema: {
      if (!nlohmann::json::accept(text)) return false;
      const nlohmann::json j = nlohmann::json::parse(text);
      return j.is_object() && j.size() == 3 && j.contains("ok") &&
             j["ok"].is_boolean() && j.contains("n") &&
             j["n"].is_number_integer() && j["n"].get<int>() >= 0 &&
             j["n"].get<int>() <= 99 && j.contains("tag") &&
             (j["tag"] == "a" || j["tag"] == "bc");
    }
  }
  return false;
}

// A cut output (kLength) is a prefix the grammar still accepts token by
// token; a finished one (kEos) ends with EOS and matches as a whole.
void ExpectFollows(const Constraint& c, const Seq& seq, int32_t eos,
                   const std::string& what) {
  SCOPED_TRACE(what + ": \"" + seq.text + "\"");
  ASSERT_TRUE(seq.finish == FinishReason::kEos ||
              seq.finish == FinishReason::kLength);
  if (seq.finish == FinishReason::kEos) {
    ASSERT_FALSE(seq.tokens.empty());
    EXPECT_EQ(seq.tokens.back(), eos);
    EXPECT_TRUE(Matches(c, seq.text));
  } else {
    for (int32_t t : seq.tokens) EXPECT_NE(t, eos);
  }
}

std::vector<Constraint> Kinds() {
  return {Choice({"yes", "no", "maybe not"}), Regex("[a-c]{2,5}-[0-9]{1,3}"),
          Schema(kSchema), Ebnf(kEbnf),
          Constraint{ConstraintKind::kAnyJson, "", {}}};
}

// Ten seeded temperature-1 requests of every kind, one of n = 3 per kind.
std::vector<Job> SampledJobs() {
  std::vector<Job> jobs;
  for (const Constraint& c : Kinds()) {
    for (uint64_t seed = 1; seed <= 10; ++seed) {
      Job j;
      j.constraint = c;
      j.seed = seed * 7919;
      j.prompt = {static_cast<int32_t>(seed), 65, 66};
      if (seed == 10) j.n = 3;
      jobs.push_back(j);
    }
  }
  return jobs;
}

void ExpectAllFollow(const std::vector<Job>& jobs,
                     const std::vector<std::vector<Seq>>& got, int32_t eos) {
  ASSERT_EQ(got.size(), jobs.size());
  int finished = 0, total = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_EQ(got[i].size(), static_cast<size_t>(jobs[i].n));
    for (size_t k = 0; k < got[i].size(); ++k) {
      ExpectFollows(jobs[i].constraint, got[i][k], eos,
                    "job " + std::to_string(i) + "." + std::to_string(k));
      finished += got[i][k].finish == FinishReason::kEos;
      ++total;
    }
  }
  // The flattened model draws near uniformly among the allowed ids; almost
  // every text completes well within the length.
  EXPECT_GE(finished * 10, total * 8) << finished << " of " << total;
}

TEST(EngineConstrainedTest, EverySampleFollowsItsConstraintOnTheHostPath) {
  Runner runner(FlatModelCopy(kTinyMamba));
  const std::vector<Job> jobs = SampledJobs();
  const auto got = runner.Run(jobs);
  ExpectAllFollow(jobs, got, runner.engine().summary().eos_token_id);
  // Sequences of one request draw differently.
  const std::vector<Seq>& three = got[9];
  EXPECT_TRUE(three[0].tokens != three[1].tokens ||
              three[1].tokens != three[2].tokens);
}

TEST(EngineConstrainedTest, DeviceSamplingGivesTheHostPathsGenerations) {
  const std::vector<Job> jobs = SampledJobs();
  for (const std::string& model :
       {FlatModelCopy(kTinyMamba), FlatModelCopy(kTinyHybrid)}) {
    SCOPED_TRACE(model);
    Runner host(model);
    Runner device(model, Path::kDevice);
    const auto want = host.Run(jobs);
    const auto got = device.Run(jobs);
    ExpectAllFollow(jobs, got, device.engine().summary().eos_token_id);
    ASSERT_EQ(want.size(), got.size());
    int64_t tokens = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      ASSERT_EQ(want[i].size(), got[i].size());
      for (size_t k = 0; k < got[i].size(); ++k) {
        EXPECT_EQ(got[i][k].tokens, want[i][k].tokens) << i << "." << k;
        EXPECT_EQ(got[i][k].finish, want[i][k].finish) << i << "." << k;
        tokens += static_cast<int64_t>(got[i][k].tokens.size());
      }
    }
    // Every constrained token was drawn by the backend, under its mask.
    EXPECT_EQ(device.masked(), tokens);
    EXPECT_EQ(device.rows(), tokens);
  }
}

TEST(EngineConstrainedTest, GreedyIsTheSameOnBothPaths) {
  std::vector<Job> jobs;
  for (const Constraint& c : Kinds()) {
    Job j;
    j.constraint = c;
    j.temperature = 0.0f;
    j.max_new_tokens = 60;
    jobs.push_back(j);
  }
  // Greedy on the peaked model, and on the flattened one.
  for (const std::string& model :
       {std::string(kTinyMamba), FlatModelCopy(kTinyMamba)}) {
    Runner host(model);
    Runner device(model, Path::kDevice);
    const auto want = host.Run(jobs);
    const auto got = device.Run(jobs);
    ASSERT_EQ(want.size(), got.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      EXPECT_EQ(got[i][0].tokens, want[i][0].tokens) << i;
      EXPECT_EQ(got[i][0].text, want[i][0].text) << i;
      ExpectFollows(jobs[i].constraint, got[i][0],
                    host.engine().summary().eos_token_id,
                    "greedy " + std::to_string(i));
    }
  }
}

// On a backend that pipelines steps, steps with a constrained sequence run
// synchronously and the others pipeline again once it is done: the
// unconstrained requests beside it draw what they draw on the host.
TEST(EngineConstrainedTest, PipelinedBackendGivesTheHostPathsGenerations) {
  const std::string model = FlatModelCopy(kTinyMamba);
  std::vector<Job> jobs;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    Job free;
    free.constrained = false;
    free.seed = seed;
    free.max_new_tokens = 40 + 10 * static_cast<int32_t>(seed);
    jobs.push_back(free);
  }
  Job schema;
  schema.constraint = Schema(kSchema);
  schema.seed = 5;
  jobs.push_back(schema);
  Job choice;
  choice.constraint = Choice({"yes", "no"});
  choice.seed = 6;
  choice.n = 2;
  jobs.push_back(choice);
  Runner host(model);
  Runner pipelined(model, Path::kPipelined);
  const auto want = host.Run(jobs);
  const auto got = pipelined.Run(jobs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    ASSERT_EQ(want[i].size(), got[i].size());
    for (size_t k = 0; k < got[i].size(); ++k) {
      EXPECT_EQ(got[i][k].tokens, want[i][k].tokens) << i << "." << k;
      if (jobs[i].constrained) {
        ExpectFollows(jobs[i].constraint, got[i][k],
                      host.engine().summary().eos_token_id,
                      "job " + std::to_string(i));
      }
    }
  }
}

// A cached prompt changes nothing of a constrained generation.
TEST(EngineConstrainedTest, PrefixReuseGivesTheUncachedOutputs) {
  const std::string model = FlatModelCopy(kTinyMamba);
  std::vector<Job> jobs;
  for (const Constraint& c : Kinds()) {
    Job j;
    j.constraint = c;
    j.seed = 99;
    j.n = 2;
    j.prompt = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
    jobs.push_back(j);
  }
  Runner uncached(model);
  const auto want = uncached.Run(jobs);
  Runner cached(model, Path::kHost, int64_t{64} << 20);
  // The first job fills the cache; everything after it starts from it.
  cached.Run({jobs[0]});
  const auto got = cached.Run(jobs);
  for (size_t i = 0; i < jobs.size(); ++i) {
    for (int k = 0; k < 2; ++k) {
      EXPECT_GT(got[i][k].cached, 0) << i;
      EXPECT_EQ(got[i][k].tokens, want[i][k].tokens) << i << "." << k;
    }
  }
}

// min_new_tokens holds the stop back while the grammar allows something
// else; a complete text that allows nothing more still stops.
TEST(EngineConstrainedTest, MinNewTokensYieldsToACompleteText) {
  Runner runner(FlatModelCopy(kTinyMamba));
  Job choice;
  choice.constraint = Choice({"ab"});
  choice.min_new_tokens = 10;
  Job regex;
  regex.constraint = Regex("x+");
  regex.min_new_tokens = 10;
  const auto got = runner.Run({choice, regex});
  EXPECT_EQ(got[0][0].text, "ab");
  EXPECT_EQ(got[0][0].finish, FinishReason::kEos);
  // "x" could stop from the first token on: not before the tenth.
  ASSERT_EQ(got[1][0].finish, FinishReason::kEos);
  const size_t len = got[1][0].tokens.size();
  EXPECT_GE(len, 11u);
  EXPECT_EQ(got[1][0].text, std::string(len - 1, 'x'));
}

// A request's stop id (here the byte 'q') is allowed only where the text is
// complete, like EOS, and ends the sequence there: never drawn as text.
TEST(EngineConstrainedTest, RequestStopIdsStopOnlyACompleteText) {
  Runner runner(FlatModelCopy(kTinyMamba));
  const int32_t eos = runner.engine().summary().eos_token_id;
  std::vector<Job> jobs;
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    Job j;
    j.constraint = Regex("[a-z]{3}");
    j.seed = seed;
    j.stop_token_ids = {'q'};
    jobs.push_back(j);
  }
  const auto got = runner.Run(jobs);
  int by_q = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Seq& seq = got[i][0];
    ASSERT_EQ(seq.finish, FinishReason::kEos) << i;
    ASSERT_EQ(seq.tokens.size(), 4u) << i;
    EXPECT_TRUE(std::regex_match(seq.text, std::regex("[a-pr-z]{3}")))
        << i << ": " << seq.text;
    EXPECT_TRUE(seq.tokens.back() == eos || seq.tokens.back() == 'q') << i;
    by_q += seq.tokens.back() == 'q';
  }
  // EOS and 'q' are equally likely at the end on the flattened model.
  EXPECT_GT(by_q, 0);
  EXPECT_LT(by_q, static_cast<int>(jobs.size()));
}

TEST(EngineConstrainedTest, BadConstraintsAreRefusedNamingThem) {
  Runner runner(kTinyMamba);
  const std::vector<std::pair<Constraint, std::string>> bad = {
      {Regex("(unclosed"), "regex"},
      {Schema("{not json"), "json_schema"},
      {Ebnf("root ::= undefined_rule"), "grammar"},
      {Choice({}), "choice"},
      {Regex("a{1,100000}"), "regex"},
  };
  for (const auto& [c, name] : bad) {
    Request r;
    r.prompt = {1, 2};
    r.constraint = c;
    EventCollector collector;
    r.sink = collector.Sink();
    const absl::Status s = runner.engine().Submit(std::move(r));
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(name), std::string::npos) << s;
  }
  // The engine goes on serving.
  Job ok;
  ok.constraint = Choice({"fine"});
  const auto got = runner.Run({ok});
  EXPECT_EQ(got[0][0].text, "fine");
}

TEST(EngineConstrainedTest, CancelMidGenerationFreesEverySlot) {
  Runner runner(FlatModelCopy(kTinyMamba));
  const int32_t slots = runner.engine().options().max_slots;
  std::vector<std::unique_ptr<EventCollector>> collectors;
  std::vector<std::shared_ptr<RequestControl>> controls;
  for (int i = 0; i < 3; ++i) {
    collectors.push_back(std::make_unique<EventCollector>());
    collectors.back()->n = 2;
    Request r;
    r.prompt = {5, 6, 7};
    r.n = 2;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.stopping.max_new_tokens = 4000;
    // Always allows more text, so min_new_tokens holds the stop back.
    r.stopping.min_new_tokens = 3000;
    r.constraint = Regex("[a-z ]*");
    r.sink = collectors.back()->Sink();
    controls.push_back(r.control);
    ASSERT_TRUE(runner.engine().Submit(std::move(r)).ok());
  }
  // Wait until each has generated something, then cancel.
  for (auto& c : collectors) {
    for (;;) {
      {
        std::lock_guard<std::mutex> lock(c->mu);
        if (c->tokens.size() >= 4) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  for (auto& control : controls) control->cancelled.store(true);
  for (auto& c : collectors) {
    const GenerationEvent last = c->done.get_future().get();
    EXPECT_EQ(last.finish, FinishReason::kCancelled);
  }
  for (int i = 0; i < 1000 && runner.engine().Stats().free_slots != slots;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(runner.engine().Stats().free_slots, slots);
  EXPECT_EQ(runner.engine().Stats().running, 0);
}

}  // namespace
}  // namespace seqboat
