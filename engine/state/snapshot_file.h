// One prefix snapshot as a file (SnapshotDisk's unit): a fixed header (magic,
// format version, the model identity it was taken under, the lengths of the
// scope, the tokens and the state), the scope, the token ids, one slot's
// state bytes, and a CRC32C of everything before it. Written to a temporary
// name, flushed to the disk and renamed (the directory flushed after), so a
// reader sees a whole file or none, after a power cut too; a file that is
// short, fails its checksum, has another magic or version, or another
// model's identity is refused with the reason, never served. Numbers are in
// the host's byte order (the identity covers the layout, and the magic's
// bytes differ on a host of the other order).
#ifndef SEQBOAT_ENGINE_STATE_SNAPSHOT_FILE_H_
#define SEQBOAT_ENGINE_STATE_SNAPSHOT_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/state/prefix_cache.h"

namespace seqboat {

// CRC32C (Castagnoli), continuing from `crc` (0 to start).
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// 64-bit FNV-1a, continuing from `h` (kFnv64Start to start): the model
// identity is built with it.
inline constexpr uint64_t kFnv64Start = 1469598103934665603ull;
uint64_t Fnv64(uint64_t h, const void* data, size_t n);

// Why a file was refused (SnapshotDiskStats counts each).
enum class SnapshotRefusal {
  kNone = 0,
  kTruncated,  // shorter (or longer) than its header says
  kCorrupt,    // checksum mismatch
  kFormat,     // not a snapshot file, or another format version
  kIdentity,   // another model, layer stack or state layout
};
inline constexpr int kSnapshotRefusalKinds = 5;
const char* SnapshotRefusalName(SnapshotRefusal r);

// What a file holds apart from its state: enough to index it.
struct SnapshotFileInfo {
  std::string scope;
  std::vector<int32_t> tokens;
  int64_t state_bytes = 0;
  int64_t file_bytes = 0;
};

// The size of the file of a snapshot of `scope_bytes`, `tokens`, `state_bytes`.
int64_t SnapshotFileBytes(size_t scope_bytes, size_t tokens,
                          int64_t state_bytes);

// Writes `snap` under `identity` to `tmp_path`, then renames it to `path`.
// An I/O error (the disk full, say) leaves no file behind.
absl::Status WriteSnapshotFile(const std::string& path,
                               const std::string& tmp_path, uint64_t identity,
                               const PrefixSnapshot& snap);

// The bytes of the file of `snap` under `identity`: what one replica exports
// to another (the wire format is the file format).
std::string EncodeSnapshot(uint64_t identity, const PrefixSnapshot& snap);

// Checks `bytes` as WriteSnapshotFile's (magic, version, identity, state
// size, length, checksum) and reads its scope and tokens into *info, its
// state into `state` (room for `state_bytes`). kNone on success.
SnapshotRefusal DecodeSnapshot(const std::string& bytes, uint64_t identity,
                               int64_t state_bytes, SnapshotFileInfo* info,
                               uint8_t* state);

// Reads a file's header, scope and tokens, checking its magic, version,
// identity, state size (`state_bytes`) and length; the checksum is checked
// only by ReadSnapshotFile. kNone and *info on success; an unreadable file
// is kTruncated.
SnapshotRefusal ReadSnapshotInfo(const std::string& path, uint64_t identity,
                                 int64_t state_bytes, SnapshotFileInfo* info);

// Reads a whole file, everything checked, the state into `state` (room for
// `state_bytes`).
SnapshotRefusal ReadSnapshotFile(const std::string& path, uint64_t identity,
                                 int64_t state_bytes, SnapshotFileInfo* info,
                                 uint8_t* state);

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_STATE_SNAPSHOT_FILE_H_
