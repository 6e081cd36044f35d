// The Scheduler's snapshots from elsewhere than memory: files of its disk
// tier and answers of its peers, each for a waiting request that is held in
// the queue (no slot) until they are in the cache; and the tasks other
// threads post to the stepping thread.
#include <algorithm>
#include <utility>

#include "engine/scheduler/scheduler.h"
#include "engine/state/snapshot_file.h"

namespace seqboat {

bool Scheduler::Post(std::function<void()> task) {
  std::lock_guard<std::mutex> lock(mu_);
  if (stopping_) return false;
  posted_.push_back(std::move(task));
  cv_.notify_one();
  return true;
}

void Scheduler::RunPosted() {
  std::vector<std::function<void()>> tasks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    tasks.swap(posted_);
  }
  for (auto& task : tasks) task();
}

void Scheduler::set_peers(SnapshotPeers* peers, uint64_t identity,
                          int32_t min_tokens) {
  peers_ = cache_ != nullptr && arena_.bytes_per_slot() > 0 ? peers : nullptr;
  identity_ = identity;
  peer_min_tokens_ = std::max(min_tokens, 1);
}

void Scheduler::StartDiskReads() {
  if (disk_ == nullptr && peers_ == nullptr) return;
  struct Fresh {
    std::shared_ptr<RequestControl> control;
    std::vector<int32_t> prompt;
    std::string scope;
  };
  std::vector<Fresh> fresh;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const Request& r : waiting_) {
      if (disk_checked_.insert(r.control.get()).second) {
        fresh.push_back({r.control, r.prompt, r.cache_scope});
      }
    }
  }
  const int64_t state_bytes = arena_.bytes_per_slot();
  for (Fresh& f : fresh) {
    // As Admit's lookup: at least the prompt's last token is computed.
    const size_t max_len = f.prompt.size() - 1;
    const size_t in_memory = cache_->MatchLength(f.prompt, max_len, f.scope);
    const size_t on_disk =
        disk_ == nullptr
            ? 0
            : disk_->MatchLength(f.prompt, max_len, f.scope, in_memory);
    const size_t here = std::max(in_memory, on_disk);
    const bool ask_peers =
        peers_ != nullptr && max_len >= here + peer_min_tokens_;
    std::shared_ptr<uint8_t> disk_block =
        on_disk > 0 ? TakeBlock() : nullptr;  // best effort, as every snapshot
    std::shared_ptr<uint8_t> peer_block = ask_peers ? TakeBlock() : nullptr;
    const int reads = (disk_block != nullptr) + (peer_block != nullptr);
    if (reads == 0) continue;
    {
      std::lock_guard<std::mutex> lock(mu_);
      disk_reading_[f.control.get()] += reads;
    }
    disk_reads_ += reads;
    DiskRead read;
    read.control = f.control;
    read.snapshot.scope = f.scope;
    read.snapshot.state_bytes = state_bytes;
    if (peer_block != nullptr) {
      PeerFetch fetch;
      fetch.scope = f.scope;
      fetch.tokens.assign(f.prompt.begin(), f.prompt.begin() + max_len);
      fetch.min_tokens = static_cast<int64_t>(here);
      fetch.max_bytes = SnapshotFileBytes(f.scope.size(), max_len, state_bytes);
      DiskRead peer_read = read;
      peer_read.snapshot.state = std::move(peer_block);
      {
        std::lock_guard<std::mutex> lock(disk_mu_);
        ++peer_stats_.fetches;
      }
      peers_->FetchAsync(
          fetch, [this, fetch, peer_read = std::move(peer_read)](
                     absl::StatusOr<std::string> answer) mutable {
            FinishPeerFetch(std::move(peer_read), fetch, std::move(answer));
          });
    }
    if (disk_block == nullptr) continue;
    f.prompt.resize(on_disk);
    read.snapshot.tokens = f.prompt;
    read.snapshot.state = disk_block;
    disk_->ReadAsync(std::move(f.prompt), std::move(f.scope),
                     std::move(disk_block),
                     [this, read = std::move(read)](absl::Status s) mutable {
                       read.status = std::move(s);
                       std::lock_guard<std::mutex> lock(disk_mu_);
                       disk_done_.push_back(std::move(read));
                       disk_cv_.notify_all();
                     });
  }
}

void Scheduler::FinishPeerFetch(DiskRead read, const PeerFetch& fetch,
                                absl::StatusOr<std::string> answer) {
  // The checks and the copy run here, on the peers' client thread, never
  // on the step path: a slot's state may be tens of MiB.
  SnapshotRefusal refused = SnapshotRefusal::kNone;
  int64_t bytes = 0;
  bool wrong = false;
  if (answer.ok()) {
    bytes = static_cast<int64_t>(answer->size());
    SnapshotFileInfo info;
    // Decoded into the block the cache will hold (nothing else holds it).
    refused = bytes > fetch.max_bytes
                  ? SnapshotRefusal::kTruncated
                  : DecodeSnapshot(
                        *answer, identity_, read.snapshot.state_bytes, &info,
                        const_cast<uint8_t*>(read.snapshot.state.get()));
    // Only an answer to the question: this scope, a prefix of the prompt,
    // longer than what is here.
    wrong = refused == SnapshotRefusal::kNone &&
            (info.scope != fetch.scope ||
             static_cast<int64_t>(info.tokens.size()) <= fetch.min_tokens ||
             info.tokens.size() > fetch.tokens.size() ||
             !std::equal(info.tokens.begin(), info.tokens.end(),
                         fetch.tokens.begin()));
    if (refused != SnapshotRefusal::kNone || wrong) {
      read.status = absl::DataLossError("a peer's snapshot was refused");
    } else {
      read.snapshot.tokens = std::move(info.tokens);
    }
  } else {
    read.status = answer.status();
  }
  std::lock_guard<std::mutex> lock(disk_mu_);
  if (answer.ok()) {
    peer_stats_.bytes += bytes;
    if (wrong) refused = SnapshotRefusal::kFormat;
    if (refused != SnapshotRefusal::kNone) {
      ++peer_stats_.refused[static_cast<int>(refused)];
    } else {
      ++peer_stats_.hits;
      peer_stats_.hit_tokens +=
          static_cast<int64_t>(read.snapshot.tokens.size());
    }
  } else if (absl::IsNotFound(answer.status())) {
    ++peer_stats_.misses;
  } else {
    ++peer_stats_.failed;
  }
  disk_done_.push_back(std::move(read));
  disk_cv_.notify_all();
}

bool Scheduler::PollDiskReads() {
  if (disk_reads_ == 0) return false;
  std::vector<DiskRead> done;
  {
    std::lock_guard<std::mutex> lock(disk_mu_);
    done.swap(disk_done_);
  }
  for (DiskRead& d : done) {
    --disk_reads_;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = disk_reading_.find(d.control.get());
      if (it != disk_reading_.end() && --it->second <= 0) {
        disk_reading_.erase(it);
      }
    }
    // A refused or vanished snapshot: the request prefills what memory
    // lacks.
    if (d.status.ok()) cache_->Insert(std::move(d.snapshot));
  }
  return disk_reads_ > 0;
}

}  // namespace seqboat
