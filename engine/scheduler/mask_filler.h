// Fills constrained sequences' allowed-id masks (Sequence::FillMask) on
// worker threads while the engine thread runs a step: a mask depends only on
// the tokens a sequence has taken, not on the step's logits, so the grammar
// work overlaps the forward instead of adding to the step's host time.
// Sequences are shared out among the workers (each mask is one sequence's,
// so any worker may fill any of them).
#ifndef SEQBOAT_ENGINE_SCHEDULER_MASK_FILLER_H_
#define SEQBOAT_ENGINE_SCHEDULER_MASK_FILLER_H_

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/scheduler/sequence.h"

namespace seqboat {

class MaskFiller {
 public:
  explicit MaskFiller(int threads = 1);  // starts the workers (>= 1)
  ~MaskFiller();  // waits for a fill in progress, then joins
  MaskFiller(const MaskFiller&) = delete;
  MaskFiller& operator=(const MaskFiller&) = delete;

  // Fills seqs[i]'s mask into words[i * words_per_row, +words_per_row) on
  // the workers. Until Wait returns nothing else may touch those sequences
  // or the words. At most one fill is outstanding.
  void Start(const std::vector<Sequence*>& seqs, uint32_t* words,
             int32_t words_per_row);
  // Returns once the fill Start began is done (at once when none is).
  void Wait();

  // Masks filled and the workers' time filling them (summed over the
  // workers), since construction.
  int64_t masks_filled() const;
  int64_t fill_ns() const;

 private:
  void Work();

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // a fill started, or stop
  std::condition_variable done_cv_;  // the fill finished
  // The fill in progress, guarded by mu_ like the rest: its sequences, the
  // next one to hand out, and how many are not filled yet.
  std::vector<Sequence*> seqs_;
  uint32_t* words_ = nullptr;
  int64_t words_per_row_ = 0;
  size_t next_ = 0;
  size_t left_ = 0;
  bool stop_ = false;
  int64_t filled_ = 0;
  int64_t fill_ns_ = 0;
  std::vector<std::thread> threads_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SCHEDULER_MASK_FILLER_H_
