// What the engine needs to move prefix snapshots between replicas and
// processes, apart from its thread: the identity a snapshot is stamped with,
// and the encoding and the checks of an export and an import (the bytes are
// a snapshot file's, engine/state/snapshot_file.h).
#ifndef SEQBOAT_ENGINE_SNAPSHOT_EXCHANGE_H_
#define SEQBOAT_ENGINE_SNAPSHOT_EXCHANGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/model_dir/model_dir.h"
#include "engine/state/prefix_cache.h"
#include "engine/state/snapshot_disk.h"

namespace seqboat {

// What a snapshot must have been taken under to be restored: the model
// (config.json, the weights file's size and its first and last MiB: hashing
// gigabytes at every start would cost more than the cache saves), the layer
// stack, one slot's state size, and the backend, which owns the state's
// layout.
uint64_t SnapshotIdentity(const ModelDir& dir, Model& model,
                          const std::string& backend);

// The bytes of the longer of `in_memory` (may be null) and the longest file
// of `disk` (may be null) of `scope` whose tokens are a prefix of `tokens`;
// NOT_FOUND when neither is longer than `min_tokens`. Reads the file on the
// caller's thread.
absl::StatusOr<std::string> EncodeExport(
    std::shared_ptr<const PrefixSnapshot> in_memory, SnapshotDisk* disk,
    const std::string& scope, const std::vector<int32_t>& tokens,
    int64_t min_tokens, uint64_t identity, int64_t state_bytes);

// The snapshot of `bytes`, its state decoded into `block` (room for
// `state_bytes`), everything checked: INVALID_ARGUMENT naming the refusal.
absl::StatusOr<std::shared_ptr<const PrefixSnapshot>> DecodeImport(
    const std::string& bytes, uint64_t identity, int64_t state_bytes,
    std::shared_ptr<uint8_t> block);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SNAPSHOT_EXCHANGE_H_
