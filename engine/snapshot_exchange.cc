#include "engine/snapshot_exchange.h"

#include <algorithm>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/state/snapshot_file.h"

namespace seqboat {

uint64_t SnapshotIdentity(const ModelDir& dir, Model& model,
                          const std::string& backend) {
  auto mix = [](uint64_t h, const std::string& s) {
    const uint64_t n = s.size();
    return Fnv64(Fnv64(h, &n, sizeof(n)), s.data(), s.size());
  };
  uint64_t h = mix(kFnv64Start, "seqboat prefix snapshot");
  h = mix(h, dir.config_json());
  std::ifstream weights(dir.FilePath("model.safetensors"), std::ios::binary);
  weights.seekg(0, std::ios::end);
  const int64_t size = weights ? static_cast<int64_t>(weights.tellg()) : -1;
  h = Fnv64(h, &size, sizeof(size));
  constexpr int64_t kEdge = int64_t{1} << 20;
  std::string edge(
      static_cast<size_t>(std::min(kEdge, std::max<int64_t>(size, 0))), '\0');
  for (int64_t at : {int64_t{0}, std::max<int64_t>(0, size - kEdge)}) {
    weights.seekg(at);
    weights.read(edge.data(), static_cast<std::streamsize>(edge.size()));
    h = mix(h, edge);
  }
  for (const auto& layer : model.layers()) h = mix(h, layer->kind());
  const int64_t slot = model.arena().bytes_per_slot();
  h = Fnv64(h, &slot, sizeof(slot));
  return mix(h, backend);
}

absl::StatusOr<std::string> EncodeExport(
    std::shared_ptr<const PrefixSnapshot> in_memory, SnapshotDisk* disk,
    const std::string& scope, const std::vector<int32_t>& tokens,
    int64_t min_tokens, uint64_t identity, int64_t state_bytes) {
  std::shared_ptr<const PrefixSnapshot> snap = std::move(in_memory);
  const size_t here =
      std::max<size_t>(snap == nullptr ? 0 : snap->tokens.size(),
                       static_cast<size_t>(std::max<int64_t>(min_tokens, 0)));
  const size_t on_disk =
      disk == nullptr ? 0
                      : disk->MatchLength(tokens, tokens.size(), scope, here);
  if (on_disk > 0) {
    auto read = std::make_shared<PrefixSnapshot>();
    read->scope = scope;
    read->tokens.assign(tokens.begin(), tokens.begin() + on_disk);
    read->state_bytes = state_bytes;
    std::shared_ptr<uint8_t> state(
        new uint8_t[static_cast<size_t>(state_bytes)],
        std::default_delete<uint8_t[]>());
    // A file refused or gone meanwhile leaves what memory has.
    if (disk->Read(read->tokens, scope, state.get()).ok()) {
      read->state = std::move(state);
      snap = std::move(read);
    }
  }
  if (snap == nullptr ||
      static_cast<int64_t>(snap->tokens.size()) <= min_tokens) {
    return absl::NotFoundError(
        absl::StrCat("no snapshot of this scope longer than ", min_tokens,
                     " tokens of these ", tokens.size()));
  }
  return EncodeSnapshot(identity, *snap);
}

absl::StatusOr<std::shared_ptr<const PrefixSnapshot>> DecodeImport(
    const std::string& bytes, uint64_t identity, int64_t state_bytes,
    std::shared_ptr<uint8_t> block) {
  SnapshotFileInfo info;
  const SnapshotRefusal refused =
      DecodeSnapshot(bytes, identity, state_bytes, &info, block.get());
  if (refused != SnapshotRefusal::kNone) {
    return absl::InvalidArgumentError(
        absl::StrCat("snapshot refused: ", SnapshotRefusalName(refused), " (",
                     bytes.size(), " bytes)"));
  }
  if (info.tokens.empty()) {
    return absl::InvalidArgumentError("snapshot refused: it holds no tokens");
  }
  auto snap = std::make_shared<PrefixSnapshot>();
  snap->scope = std::move(info.scope);
  snap->tokens = std::move(info.tokens);
  snap->state = std::move(block);
  snap->state_bytes = state_bytes;
  return std::shared_ptr<const PrefixSnapshot>(std::move(snap));
}

}  // namespace seqboat
