// Timing helpers the benchmark programs share: medians of repeated runs, the
// machine's memory bandwidth, and timed decode steps and prefills on a Model.
#ifndef SEQBOAT_BENCH_BENCH_UTIL_H_
#define SEQBOAT_BENCH_BENCH_UTIL_H_

#include <chrono>
#include <vector>

#include "engine/model/model.h"

namespace seqboat::bench {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b);
double Median(std::vector<double> v);
// Read bandwidth (GB/s) over 1 GiB, all threads: the best of five runs.
double MeasureReadBandwidth();
// Bandwidth (GB/s, reads plus writes) of updating 512 MiB in place, all
// threads: the best of five runs. A recurrent state's traffic has this shape.
double MeasureUpdateBandwidth();
// Median seconds of one decode step of every slot in `slots` (after warm-up).
double DecodeStepSeconds(Model& model, const std::vector<int>& slots,
                         int steps);
// Median seconds of one mixed step: a decode row of every slot in `slots`,
// with a prompt chunk of `chunk` tokens between the first half and the
// second on a slot of its own (acquired afresh before each step, untimed).
double MixedStepSeconds(Model& model, const std::vector<int>& slots, int chunk,
                        int steps);
// Seconds to prefill `tokens` tokens into `slot` in chunks of `chunk`.
double Prefill(Model& model, int slot, int tokens, int chunk);

}  // namespace seqboat::bench

#endif  // SEQBOAT_BENCH_BENCH_UTIL_H_
