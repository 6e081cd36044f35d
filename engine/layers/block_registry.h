// The table of block kinds this build runs, looked up by config.json's
// spelling. One line per kind in block_registry.cc.
#ifndef SEQBOAT_ENGINE_LAYERS_BLOCK_REGISTRY_H_
#define SEQBOAT_ENGINE_LAYERS_BLOCK_REGISTRY_H_

#include <string_view>

#include "engine/layers/block.h"

namespace seqboat {

// The kind named `name`, or nullptr when this build cannot run it.
const BlockKind* FindBlockKind(std::string_view name);

// True for kinds MODELS.md §6.1 defines that this build does not run (their
// error says "not supported" rather than "unknown").
bool IsKnownUnsupportedBlockKind(std::string_view name);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_LAYERS_BLOCK_REGISTRY_H_
