// Fills constrained sequences' allowed-id masks (Sequence::FillMask) on a
// worker thread while the engine thread runs a step: a mask depends only on
// the tokens a sequence has taken, not on the step's logits, so the grammar
// work overlaps the forward instead of adding to the step's host time.
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
  MaskFiller();   // starts the worker
  ~MaskFiller();  // waits for a fill in progress, then joins
  MaskFiller(const MaskFiller&) = delete;
  MaskFiller& operator=(const MaskFiller&) = delete;

  // Fills seqs[i]'s mask into words[i * words_per_row, +words_per_row) on
  // the worker. Until Wait returns nothing else may touch those sequences
  // or the words. At most one fill is outstanding.
  void Start(const std::vector<Sequence*>& seqs, uint32_t* words,
             int32_t words_per_row);
  // Returns once the fill Start began is done (at once when none is).
  void Wait();

  // Masks filled and the worker's time filling them, since construction.
  int64_t masks_filled() const;
  int64_t fill_ns() const;

 private:
  void Work();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Sequence*> seqs_;  // guarded by mu_, as are the rest
  uint32_t* words_ = nullptr;
  int32_t words_per_row_ = 0;
  bool busy_ = false;
  bool stop_ = false;
  int64_t filled_ = 0;
  int64_t fill_ns_ = 0;
  std::thread thread_;
};

}  // namespace seqboat

#endif  // SEQBOAT_ENGINE_SCHEDULER_MASK_FILLER_H_
