#include "engine/layers/block_registry.h"

#include "engine/layers/attention.h"
#include "engine/layers/gdn.h"
#include "engine/layers/mamba1.h"
#include "engine/layers/mamba2.h"
#include "engine/layers/mlp.h"
#include "engine/layers/moe.h"
#include "engine/layers/parallel.h"
#include "engine/layers/s4d.h"
#include "engine/layers/seqboat.h"

namespace seqboat {
namespace {

const BlockKind* const kBlockKinds[] = {
    &kMamba1Block,    &kMamba2Block, &kSeqBoatBlock,
    &kAttentionBlock, &kMlpBlock,    &kMoeBlock,
    &kS4dBlock,       &kGdnBlock,    &kParallelMamba2AttentionBlock,
};

constexpr std::string_view kUnsupported[] = {"s4_local"};

}  // namespace

const BlockKind* FindBlockKind(std::string_view name) {
  for (const BlockKind* kind : kBlockKinds) {
    if (kind->name == name) return kind;
  }
  return nullptr;
}

bool IsKnownUnsupportedBlockKind(std::string_view name) {
  for (std::string_view n : kUnsupported) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace seqboat
