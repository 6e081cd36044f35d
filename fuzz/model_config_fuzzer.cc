// ParseModelConfig on arbitrary text. Either an error that names its source,
// or a config whose model-wide fields hold what config.h promises: positive
// sizes, ids inside the vocabulary, at least one block, each of a kind this
// build runs.
#include <cmath>
#include <cstdint>
#include <string_view>

#include "absl/strings/match.h"
#include "engine/model/config.h"
#include "fuzz/fuzz_check.h"

namespace {

bool Positive(double x) { return std::isfinite(x) && x > 0; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = seqboat::ParseModelConfig(text, "fuzz.json");
  if (!config.ok()) {
    FUZZ_CHECK(absl::StartsWith(config.status().message(), "fuzz.json"),
               "error without its source: %s",
               std::string(config.status().message()).c_str());
    return 0;
  }
  FUZZ_CHECK(config->vocab_size > 0 && config->d_model > 0);
  FUZZ_CHECK(!config->blocks.empty());
  for (const seqboat::BlockConfig& block : config->blocks) {
    FUZZ_CHECK(block.kind != nullptr && block.params.has_value());
    if (block.norm.has_value()) FUZZ_CHECK(Positive(block.norm->eps));
  }
  if (config->final_norm.has_value()) {
    FUZZ_CHECK(Positive(config->final_norm->eps));
  }
  for (const auto& id : {config->eos_token_id, config->bos_token_id,
                         config->embed.padding_idx}) {
    if (id.has_value()) FUZZ_CHECK(*id >= 0 && *id < config->vocab_size);
  }
  FUZZ_CHECK(Positive(config->embed.scale) && Positive(config->logit_scale));
  return 0;
}
