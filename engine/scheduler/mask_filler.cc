#include "engine/scheduler/mask_filler.h"

#include <chrono>

namespace seqboat {

MaskFiller::MaskFiller() : thread_([this] { Work(); }) {}

MaskFiller::~MaskFiller() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskFiller::Start(const std::vector<Sequence*>& seqs, uint32_t* words,
                       int32_t words_per_row) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !busy_; });
    seqs_.assign(seqs.begin(), seqs.end());
    words_ = words;
    words_per_row_ = words_per_row;
    busy_ = !seqs_.empty();
  }
  cv_.notify_all();
}

void MaskFiller::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

int64_t MaskFiller::masks_filled() const {
  std::lock_guard<std::mutex> lock(mu_);
  return filled_;
}

int64_t MaskFiller::fill_ns() const {
  std::lock_guard<std::mutex> lock(mu_);
  return fill_ns_;
}

void MaskFiller::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return busy_ || stop_; });
    if (stop_) return;
    // The job's sequences and words are the worker's until busy_ clears.
    const std::vector<Sequence*> seqs = std::move(seqs_);
    uint32_t* const words = words_;
    const int64_t per_row = words_per_row_;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    for (size_t i = 0; i < seqs.size(); ++i)
      seqs[i]->FillMask(words + static_cast<int64_t>(i) * per_row);
    const auto took = std::chrono::steady_clock::now() - start;
    lock.lock();
    filled_ += static_cast<int64_t>(seqs.size());
    fill_ns_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace seqboat
