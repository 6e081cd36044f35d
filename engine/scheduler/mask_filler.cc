#include "engine/scheduler/mask_filler.h"

#include <algorithm>
#include <chrono>

namespace seqboat {

MaskFiller::MaskFiller(int threads) {
  for (int i = 0; i < std::max(1, threads); ++i)
    threads_.emplace_back([this] { Work(); });
}

MaskFiller::~MaskFiller() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return left_ == 0; });
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void MaskFiller::Start(const std::vector<Sequence*>& seqs, uint32_t* words,
                       int32_t words_per_row) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    done_cv_.wait(lock, [this] { return left_ == 0; });
    if (seqs.empty()) return;
    seqs_.assign(seqs.begin(), seqs.end());
    words_ = words;
    words_per_row_ = words_per_row;
    next_ = 0;
    left_ = seqs_.size();
  }
  work_cv_.notify_all();
}

void MaskFiller::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  done_cv_.wait(lock, [this] { return left_ == 0; });
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
    work_cv_.wait(lock, [this] { return next_ < seqs_.size() || stop_; });
    if (stop_) return;
    // One sequence at a time, so that the workers balance uneven masks.
    const size_t i = next_++;
    Sequence* const seq = seqs_[i];
    uint32_t* const words = words_ + static_cast<int64_t>(i) * words_per_row_;
    lock.unlock();
    const auto start = std::chrono::steady_clock::now();
    seq->FillMask(words);
    const auto took = std::chrono::steady_clock::now() - start;
    lock.lock();
    ++filled_;
    fill_ns_ +=
        std::chrono::duration_cast<std::chrono::nanoseconds>(took).count();
    if (--left_ == 0) {
      seqs_.clear();
      next_ = 0;
      done_cv_.notify_all();
    }
  }
}

}  // namespace seqboat
