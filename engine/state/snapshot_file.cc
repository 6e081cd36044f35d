#include "engine/state/snapshot_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

constexpr char kMagic[8] = {'S', 'Q', 'B', 'S', 'N', 'A', 'P', '\x01'};
constexpr uint32_t kFormatVersion = 1;

// The fixed part of the file, as written.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t scope_bytes;
  uint64_t identity;
  uint64_t tokens;
  uint64_t state_bytes;
};
static_assert(sizeof(Header) == 40, "the header has no padding");

// Slicing-by-8 tables of the reflected Castagnoli polynomial, built at
// compile time.
using CrcTables = std::array<std::array<uint32_t, 256>, 8>;
constexpr CrcTables MakeCrcTables() {
  CrcTables t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1u)));
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) {
      t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xffu];
    }
  }
  return t;
}
constexpr CrcTables kCrc = MakeCrcTables();

// Owns a file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

absl::Status WriteAll(int fd, const void* data, size_t n,
                      const std::string& path) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      return absl::InternalError(
          absl::StrCat("writing ", path, ": ", std::strerror(errno)));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Reads exactly n bytes; false at end of file or on error.
bool ReadAll(int fd, void* data, size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// Whether a header read from `size` bytes is this identity's and state
// size's, and says exactly that many bytes.
SnapshotRefusal CheckHeader(const Header& h, uint64_t identity,
                            int64_t state_bytes, int64_t size) {
  if (std::memcmp(h.magic, kMagic, sizeof(kMagic)) != 0 ||
      h.version != kFormatVersion) {
    return SnapshotRefusal::kFormat;
  }
  if (h.identity != identity) return SnapshotRefusal::kIdentity;
  if (static_cast<int64_t>(h.state_bytes) != state_bytes ||
      h.tokens > (uint64_t{1} << 32)) {
    return SnapshotRefusal::kIdentity;
  }
  if (size != SnapshotFileBytes(h.scope_bytes, h.tokens, state_bytes)) {
    return SnapshotRefusal::kTruncated;
  }
  return SnapshotRefusal::kNone;
}

Header HeaderOf(uint64_t identity, const PrefixSnapshot& snap) {
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof(kMagic));
  h.version = kFormatVersion;
  h.scope_bytes = static_cast<uint32_t>(snap.scope.size());
  h.identity = identity;
  h.tokens = snap.tokens.size();
  h.state_bytes = static_cast<uint64_t>(snap.state_bytes);
  return h;
}

// fsync, retried on EINTR.
absl::Status Sync(int fd, const std::string& path) {
  while (fsync(fd) != 0) {
    if (errno != EINTR) {
      return absl::InternalError(
          absl::StrCat("flushing ", path, ": ", std::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

// Flushes the directory holding `path`, so that a rename into it lasts.
absl::Status SyncDirectoryOf(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  Fd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::InternalError(
        absl::StrCat("opening ", dir, ": ", std::strerror(errno)));
  }
  return Sync(fd.get(), dir);
}

// Opens `path` and reads and checks its header, scope and tokens; `crc` is
// the checksum so far. The descriptor is left after the tokens.
SnapshotRefusal ReadPrefix(const std::string& path, uint64_t identity,
                           int64_t state_bytes, SnapshotFileInfo* info,
                           uint32_t* crc, std::unique_ptr<Fd>* out) {
  auto fd = std::make_unique<Fd>(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (fd->get() < 0 || fstat(fd->get(), &st) != 0) {
    return SnapshotRefusal::kTruncated;
  }
  Header h;
  if (!ReadAll(fd->get(), &h, sizeof(h))) {
    // Shorter than a header: a magic that is there but cut off counts as
    // truncated, anything else is not a snapshot.
    return SnapshotRefusal::kTruncated;
  }
  const SnapshotRefusal r = CheckHeader(h, identity, state_bytes, st.st_size);
  if (r != SnapshotRefusal::kNone) return r;
  const int64_t expect = st.st_size;
  info->scope.resize(h.scope_bytes);
  info->tokens.resize(h.tokens);
  if (!ReadAll(fd->get(), info->scope.data(), info->scope.size()) ||
      !ReadAll(fd->get(), info->tokens.data(),
               info->tokens.size() * sizeof(int32_t))) {
    return SnapshotRefusal::kTruncated;
  }
  info->state_bytes = state_bytes;
  info->file_bytes = expect;
  uint32_t c = Crc32c(0, &h, sizeof(h));
  c = Crc32c(c, info->scope.data(), info->scope.size());
  *crc = Crc32c(c, info->tokens.data(), info->tokens.size() * sizeof(int32_t));
  *out = std::move(fd);
  return SnapshotRefusal::kNone;
}

}  // namespace

uint32_t Crc32c(uint32_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo, hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;
    c = kCrc[7][lo & 0xffu] ^ kCrc[6][(lo >> 8) & 0xffu] ^
        kCrc[5][(lo >> 16) & 0xffu] ^ kCrc[4][lo >> 24] ^ kCrc[3][hi & 0xffu] ^
        kCrc[2][(hi >> 8) & 0xffu] ^ kCrc[1][(hi >> 16) & 0xffu] ^
        kCrc[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n-- > 0) c = (c >> 8) ^ kCrc[0][(c ^ *p++) & 0xffu];
  return ~c;
}

uint64_t Fnv64(uint64_t h, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

const char* SnapshotRefusalName(SnapshotRefusal r) {
  switch (r) {
    case SnapshotRefusal::kNone:
      return "none";
    case SnapshotRefusal::kTruncated:
      return "truncated";
    case SnapshotRefusal::kCorrupt:
      return "checksum";
    case SnapshotRefusal::kFormat:
      return "format";
    case SnapshotRefusal::kIdentity:
      return "identity";
  }
  return "unknown";
}

int64_t SnapshotFileBytes(size_t scope_bytes, size_t tokens,
                          int64_t state_bytes) {
  return static_cast<int64_t>(sizeof(Header) + scope_bytes +
                              tokens * sizeof(int32_t)) +
         state_bytes + static_cast<int64_t>(sizeof(uint32_t));
}

absl::Status WriteSnapshotFile(const std::string& path,
                               const std::string& tmp_path, uint64_t identity,
                               const PrefixSnapshot& snap) {
  const Header h = HeaderOf(identity, snap);
  Fd fd(open(tmp_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    return absl::InternalError(
        absl::StrCat("creating ", tmp_path, ": ", std::strerror(errno)));
  }
  const size_t token_bytes = snap.tokens.size() * sizeof(int32_t);
  uint32_t crc = Crc32c(0, &h, sizeof(h));
  crc = Crc32c(crc, snap.scope.data(), snap.scope.size());
  crc = Crc32c(crc, snap.tokens.data(), token_bytes);
  const size_t state_bytes = static_cast<size_t>(snap.state_bytes);
  if (state_bytes > 0) crc = Crc32c(crc, snap.state.get(), state_bytes);
  absl::Status s = WriteAll(fd.get(), &h, sizeof(h), tmp_path);
  if (s.ok())
    s = WriteAll(fd.get(), snap.scope.data(), snap.scope.size(), tmp_path);
  if (s.ok()) s = WriteAll(fd.get(), snap.tokens.data(), token_bytes, tmp_path);
  if (s.ok() && state_bytes > 0) {
    s = WriteAll(fd.get(), snap.state.get(), state_bytes, tmp_path);
  }
  if (s.ok()) s = WriteAll(fd.get(), &crc, sizeof(crc), tmp_path);
  // The data reaches the disk before the name does: a power cut leaves the
  // old name or a whole file, never a named file of zeros.
  if (s.ok()) s = Sync(fd.get(), tmp_path);
  if (s.ok() && close(fd.Release()) != 0) {
    s = absl::InternalError(
        absl::StrCat("closing ", tmp_path, ": ", std::strerror(errno)));
  }
  if (s.ok() && rename(tmp_path.c_str(), path.c_str()) != 0) {
    s = absl::InternalError(absl::StrCat("renaming ", tmp_path, " to ", path,
                                         ": ", std::strerror(errno)));
  }
  if (!s.ok()) {
    unlink(tmp_path.c_str());
    return s;
  }
  return SyncDirectoryOf(path);
}

std::string EncodeSnapshot(uint64_t identity, const PrefixSnapshot& snap) {
  const Header h = HeaderOf(identity, snap);
  const size_t token_bytes = snap.tokens.size() * sizeof(int32_t);
  const size_t state_bytes = static_cast<size_t>(snap.state_bytes);
  std::string out;
  out.reserve(static_cast<size_t>(
      SnapshotFileBytes(snap.scope.size(), snap.tokens.size(), state_bytes)));
  out.append(reinterpret_cast<const char*>(&h), sizeof(h));
  out.append(snap.scope);
  out.append(reinterpret_cast<const char*>(snap.tokens.data()), token_bytes);
  if (state_bytes > 0) {
    out.append(reinterpret_cast<const char*>(snap.state.get()), state_bytes);
  }
  const uint32_t crc = Crc32c(0, out.data(), out.size());
  out.append(reinterpret_cast<const char*>(&crc), sizeof(crc));
  return out;
}

SnapshotRefusal DecodeSnapshot(const std::string& bytes, uint64_t identity,
                               int64_t state_bytes, SnapshotFileInfo* info,
                               uint8_t* state) {
  Header h;
  if (bytes.size() < sizeof(h)) return SnapshotRefusal::kTruncated;
  std::memcpy(&h, bytes.data(), sizeof(h));
  const SnapshotRefusal r =
      CheckHeader(h, identity, state_bytes, static_cast<int64_t>(bytes.size()));
  if (r != SnapshotRefusal::kNone) return r;
  const size_t body = bytes.size() - sizeof(uint32_t);
  uint32_t stored = 0;
  std::memcpy(&stored, bytes.data() + body, sizeof(stored));
  if (Crc32c(0, bytes.data(), body) != stored) return SnapshotRefusal::kCorrupt;
  const char* p = bytes.data() + sizeof(h);
  info->scope.assign(p, h.scope_bytes);
  p += h.scope_bytes;
  info->tokens.resize(h.tokens);
  std::memcpy(info->tokens.data(), p, h.tokens * sizeof(int32_t));
  p += h.tokens * sizeof(int32_t);
  if (state_bytes > 0) std::memcpy(state, p, static_cast<size_t>(state_bytes));
  info->state_bytes = state_bytes;
  info->file_bytes = static_cast<int64_t>(bytes.size());
  return SnapshotRefusal::kNone;
}

SnapshotRefusal ReadSnapshotInfo(const std::string& path, uint64_t identity,
                                 int64_t state_bytes, SnapshotFileInfo* info) {
  uint32_t crc = 0;
  std::unique_ptr<Fd> fd;
  return ReadPrefix(path, identity, state_bytes, info, &crc, &fd);
}

SnapshotRefusal ReadSnapshotFile(const std::string& path, uint64_t identity,
                                 int64_t state_bytes, SnapshotFileInfo* info,
                                 uint8_t* state) {
  uint32_t crc = 0;
  std::unique_ptr<Fd> fd;
  const SnapshotRefusal r =
      ReadPrefix(path, identity, state_bytes, info, &crc, &fd);
  if (r != SnapshotRefusal::kNone) return r;
  const size_t n = static_cast<size_t>(state_bytes);
  uint32_t stored = 0;
  if ((n > 0 && !ReadAll(fd->get(), state, n)) ||
      !ReadAll(fd->get(), &stored, sizeof(stored))) {
    return SnapshotRefusal::kTruncated;
  }
  if (n > 0) crc = Crc32c(crc, state, n);
  return crc == stored ? SnapshotRefusal::kNone : SnapshotRefusal::kCorrupt;
}

}  // namespace seqboat
