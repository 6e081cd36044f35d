// DecodeSnapshot on arbitrary bytes, as a replica receives them from a peer
// (and as a snapshot file's reader checks them). Either it refuses them with
// a reason, or they are exactly the encoding of what it decoded: nothing
// short, long, corrupt or of another model is ever taken.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/state/snapshot_file.h"
#include "fuzz/fuzz_check.h"

namespace {

// The seeds in fuzz/corpus/snapshot are of this identity and state size.
constexpr uint64_t kIdentity = 42;
constexpr int64_t kStateBytes = 64;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  seqboat::SnapshotFileInfo info;
  std::vector<uint8_t> state(kStateBytes, 0);
  const seqboat::SnapshotRefusal r = seqboat::DecodeSnapshot(
      bytes, kIdentity, kStateBytes, &info, state.data());
  if (r != seqboat::SnapshotRefusal::kNone) {
    FUZZ_CHECK(static_cast<int>(r) < seqboat::kSnapshotRefusalKinds);
    return 0;
  }
  FUZZ_CHECK(info.state_bytes == kStateBytes);
  FUZZ_CHECK(info.file_bytes == static_cast<int64_t>(size));
  seqboat::PrefixSnapshot snap;
  snap.scope = info.scope;
  snap.tokens = info.tokens;
  std::shared_ptr<uint8_t> copy(new uint8_t[kStateBytes],
                                std::default_delete<uint8_t[]>());
  std::memcpy(copy.get(), state.data(), kStateBytes);
  snap.state = copy;
  snap.state_bytes = kStateBytes;
  FUZZ_CHECK(seqboat::EncodeSnapshot(kIdentity, snap) == bytes,
             "accepted bytes are not the encoding of what they decoded to");
  return 0;
}
