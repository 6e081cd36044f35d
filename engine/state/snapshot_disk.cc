#include "engine/state/snapshot_disk.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/state/prefix_hash.h"
#include "spdlog/spdlog.h"

namespace seqboat {
namespace {

constexpr char kSuffix[] = ".snap";
constexpr char kTmpPrefix[] = ".tmp-";

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

SnapshotDisk::SnapshotDisk(SnapshotDiskOptions options)
    : options_(std::move(options)) {
  stats_.budget_bytes = options_.budget_bytes;
}

absl::StatusOr<std::unique_ptr<SnapshotDisk>> SnapshotDisk::Open(
    SnapshotDiskOptions options) {
  if (options.dir.empty() || options.budget_bytes <= 0 ||
      options.state_bytes < 0 || options.queue_depth < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "snapshot directory '", options.dir, "' needs a budget > 0 (got ",
        options.budget_bytes, ") and a queue depth >= 1 (got ",
        options.queue_depth, ")"));
  }
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec || !std::filesystem::is_directory(options.dir)) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot directory ", options.dir,
                     " cannot be created: ", ec.message()));
  }
  std::unique_ptr<SnapshotDisk> disk(new SnapshotDisk(std::move(options)));
  if (absl::Status s = disk->Scan(); !s.ok()) return s;
  disk->writer_ = std::thread([d = disk.get()] { d->WriterLoop(); });
  disk->reader_ = std::thread([d = disk.get()] { d->ReaderLoop(); });
  return disk;
}

SnapshotDisk::~SnapshotDisk() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    cv_.notify_all();
  }
  if (writer_.joinable()) writer_.join();
  if (reader_.joinable()) reader_.join();
}

absl::Status SnapshotDisk::Scan() {
  struct Found {
    std::filesystem::file_time_type mtime;
    std::string path;
    SnapshotFileInfo info;
  };
  std::vector<Found> found;
  std::error_code ec;
  for (const auto& de : std::filesystem::directory_iterator(options_.dir, ec)) {
    const std::string name = de.path().filename().string();
    const std::string path = de.path().string();
    if (absl::StartsWith(name, kTmpPrefix)) {
      // A write cut off by a crash: never renamed, never indexed.
      unlink(path.c_str());
      continue;
    }
    if (!absl::EndsWith(name, kSuffix) || !de.is_regular_file()) continue;
    Found f;
    f.path = path;
    f.mtime = de.last_write_time();
    const SnapshotRefusal r = ReadSnapshotInfo(path, options_.identity,
                                               options_.state_bytes, &f.info);
    if (r != SnapshotRefusal::kNone) {
      Refuse(path, r);
      continue;
    }
    // Only a file under the name its contents give is found again.
    if (path !=
        PathOf(PrefixHashOf(f.info.scope, f.info.tokens, f.info.tokens.size()),
               f.info.tokens.size())) {
      Refuse(path, SnapshotRefusal::kFormat);
      continue;
    }
    found.push_back(std::move(f));
  }
  if (ec) {
    return absl::FailedPreconditionError(
        absl::StrCat("snapshot directory ", options_.dir,
                     " cannot be read: ", ec.message()));
  }
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  std::vector<std::string> evict;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (Found& f : found) {
      Entry e;
      e.hash = PrefixHashOf(f.info.scope, f.info.tokens, f.info.tokens.size());
      e.scope = std::move(f.info.scope);
      e.tokens = std::move(f.info.tokens);
      e.file_bytes = f.info.file_bytes;
      IndexLocked(std::move(e));
    }
    // A smaller budget than the last run's: the oldest go.
    while (stats_.bytes > options_.budget_bytes && !lru_.empty()) {
      auto last = std::prev(lru_.end());
      evict.push_back(PathOf(last->hash, last->tokens.size()));
      DropLocked(last);
      ++stats_.evicted;
    }
  }
  for (const std::string& p : evict) unlink(p.c_str());
  spdlog::info("snapshot directory {}: {} snapshots, {} bytes", options_.dir,
               Stats().files, Stats().bytes);
  return absl::OkStatus();
}

std::string SnapshotDisk::PathOf(uint64_t hash, size_t len) const {
  return absl::StrFormat("%s/%016x-%d%s", options_.dir, hash, len, kSuffix);
}

SnapshotDisk::Lru::iterator SnapshotDisk::FindLocked(
    const std::vector<int32_t>& tokens, size_t len, const std::string& scope,
    uint64_t hash) const {
  auto [first, last] = by_hash_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const Entry& e = *it->second;
    if (e.tokens.size() == len && e.scope == scope &&
        std::equal(e.tokens.begin(), e.tokens.end(), tokens.begin())) {
      return it->second;
    }
  }
  return lru_.end();
}

void SnapshotDisk::IndexLocked(Entry entry) {
  // Another snapshot under the same name (a hash collision) was replaced.
  auto [first, last] = by_hash_.equal_range(entry.hash);
  for (auto it = first; it != last; ++it) {
    if (it->second->tokens.size() == entry.tokens.size()) {
      DropLocked(it->second);
      break;
    }
  }
  const uint64_t hash = entry.hash;
  ++lengths_[entry.tokens.size()];
  stats_.bytes += entry.file_bytes;
  ++stats_.files;
  lru_.push_front(std::move(entry));
  by_hash_.emplace(hash, lru_.begin());
}

void SnapshotDisk::DropLocked(Lru::iterator it) {
  auto [first, last] = by_hash_.equal_range(it->hash);
  for (auto h = first; h != last; ++h) {
    if (h->second == it) {
      by_hash_.erase(h);
      break;
    }
  }
  const size_t len = it->tokens.size();
  if (--lengths_[len] == 0) lengths_.erase(len);
  stats_.bytes -= it->file_bytes;
  --stats_.files;
  lru_.erase(it);
}

void SnapshotDisk::Refuse(const std::string& path, SnapshotRefusal why) {
  spdlog::warn("snapshot file {} refused ({}); deleted", path,
               SnapshotRefusalName(why));
  unlink(path.c_str());
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.refused[static_cast<int>(why)];
}

bool SnapshotDisk::Write(std::shared_ptr<const PrefixSnapshot> snap,
                         bool wait) {
  if (snap == nullptr || snap->tokens.empty() ||
      snap->state_bytes != options_.state_bytes) {
    return false;
  }
  std::unique_lock<std::mutex> lock(mu_);
  const size_t len = snap->tokens.size();
  auto it = FindLocked(snap->tokens, len, snap->scope,
                       PrefixHashOf(snap->scope, snap->tokens, len));
  if (it != lru_.end()) {
    lru_.splice(lru_.begin(), lru_, it);
    return true;
  }
  const size_t depth = static_cast<size_t>(options_.queue_depth);
  if (wait) {
    cv_.wait(lock, [&] { return stopping_ || writes_.size() < depth; });
  }
  if (stopping_ || writes_.size() >= depth) {
    ++stats_.dropped;
    return false;
  }
  writes_.push_back(std::move(snap));
  cv_.notify_all();
  return true;
}

void SnapshotDisk::Flush() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return writes_.empty() && !writing_; });
}

void SnapshotDisk::WriterLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !writes_.empty(); });
    // What was queued before the stop is still written.
    if (writes_.empty()) return;
    std::shared_ptr<const PrefixSnapshot> snap = std::move(writes_.front());
    writes_.pop_front();
    writing_ = true;
    lock.unlock();
    WriteOne(*snap);
    snap.reset();  // the host block goes back to its pool
    lock.lock();
    writing_ = false;
    cv_.notify_all();
  }
}

void SnapshotDisk::WriteOne(const PrefixSnapshot& snap) {
  const size_t len = snap.tokens.size();
  const uint64_t hash = PrefixHashOf(snap.scope, snap.tokens, len);
  const int64_t bytes =
      SnapshotFileBytes(snap.scope.size(), len, snap.state_bytes);
  std::vector<std::string> evict;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (FindLocked(snap.tokens, len, snap.scope, hash) != lru_.end()) return;
    if (bytes > options_.budget_bytes) {
      ++stats_.dropped;
      return;
    }
    while (stats_.bytes + bytes > options_.budget_bytes && !lru_.empty()) {
      auto last = std::prev(lru_.end());
      evict.push_back(PathOf(last->hash, last->tokens.size()));
      DropLocked(last);
      ++stats_.evicted;
    }
  }
  for (const std::string& p : evict) unlink(p.c_str());
  const std::string path = PathOf(hash, len);
  const std::string tmp =
      absl::StrFormat("%s/%s%016x-%d", options_.dir, kTmpPrefix, hash, len);
  const absl::Status s = WriteSnapshotFile(path, tmp, options_.identity, snap);
  std::lock_guard<std::mutex> lock(mu_);
  if (!s.ok()) {
    // A full disk or a read-only volume: counted, and the cache goes on.
    if (stats_.write_errors++ == 0) spdlog::warn("{}", s.ToString());
    return;
  }
  ++stats_.writes;
  stats_.written_bytes += bytes;
  IndexLocked({hash, snap.scope, snap.tokens, bytes});
}

size_t SnapshotDisk::MatchLength(const std::vector<int32_t>& prompt,
                                 size_t max_len, const std::string& scope,
                                 size_t min_len) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (lengths_.empty()) return 0;
  max_len = std::min(max_len, prompt.size());
  const auto candidates = PrefixCandidates(scope, prompt, max_len, lengths_);
  for (auto c = candidates.rbegin(); c != candidates.rend(); ++c) {
    if (c->first <= min_len) break;
    if (FindLocked(prompt, c->first, scope, c->second) != lru_.end()) {
      return c->first;
    }
  }
  return 0;
}

absl::Status SnapshotDisk::Read(const std::vector<int32_t>& tokens,
                                const std::string& scope, uint8_t* state) {
  const size_t len = tokens.size();
  const uint64_t hash = PrefixHashOf(scope, tokens, len);
  const std::string path = PathOf(hash, len);
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = FindLocked(tokens, len, scope, hash);
    if (it == lru_.end()) {
      return absl::NotFoundError("no such snapshot on disk");
    }
    lru_.splice(lru_.begin(), lru_, it);
  }
  SnapshotFileInfo info;
  const SnapshotRefusal r = ReadSnapshotFile(
      path, options_.identity, options_.state_bytes, &info, state);
  if (r == SnapshotRefusal::kTruncated && !Exists(path)) {
    // Evicted between the lookup and the open.
    return absl::NotFoundError("snapshot evicted from disk");
  }
  if (r != SnapshotRefusal::kNone) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = FindLocked(tokens, len, scope, hash);
      if (it != lru_.end()) DropLocked(it);
    }
    Refuse(path, r);
    return absl::DataLossError(absl::StrCat(
        "snapshot file ", path, " refused: ", SnapshotRefusalName(r)));
  }
  if (info.scope != scope || info.tokens != tokens) {
    // Replaced under the same name by a snapshot whose hash collides.
    return absl::NotFoundError("snapshot replaced on disk");
  }
  std::lock_guard<std::mutex> lock(mu_);
  ++stats_.hits;
  stats_.hit_tokens += static_cast<int64_t>(len);
  stats_.read_bytes += info.file_bytes;
  return absl::OkStatus();
}

void SnapshotDisk::ReadAsync(std::vector<int32_t> tokens, std::string scope,
                             std::shared_ptr<uint8_t> state,
                             std::function<void(absl::Status)> done) {
  std::lock_guard<std::mutex> lock(mu_);
  reads_.push_back(
      {std::move(tokens), std::move(scope), std::move(state), std::move(done)});
  cv_.notify_all();
}

void SnapshotDisk::ReaderLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !reads_.empty(); });
    if (reads_.empty()) return;
    ReadJob job = std::move(reads_.front());
    reads_.pop_front();
    lock.unlock();
    const absl::Status s = Read(job.tokens, job.scope, job.state.get());
    job.done(s);
    job = ReadJob();
    lock.lock();
  }
}

SnapshotDiskStats SnapshotDisk::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

}  // namespace seqboat
