// Runtime of the CUDA emulation (cuda_emulation.h): runs a kernel's grid on
// the calling CPU thread with one cooperative context per CUDA thread.
//
// What is emulated: every block of the grid, one after another, each with
// blockDim cooperative threads (ucontext) that switch only at the emulated
// synchronisation points (__syncthreads, the warp shuffles and votes,
// __syncwarp); shared memory (static __shared__ arrays are one copy per
// kernel, reused by each block in turn; the dynamic array is refilled with
// 0xff bytes, a NaN pattern, at every block start); launch limits (block
// size, grid size, dynamic shared memory above 48 KiB only after
// cudaFuncSetAttribute raised the kernel's limit, at most an H100's 227 KiB).
// Early launches (launch.cuh) run in order like the rest; every thread of one
// must call WaitForPriorGrids, and L2 prefetches are checked and recorded.
// Misuse that would hang or be undefined on a GPU aborts with a message: a
// barrier some threads never reach (deadlock), a full-mask warp operation in
// a partial warp or after a lane of the warp exited.
//
// What is not: concurrency. Blocks never overlap, so races between blocks go
// unseen; warps are not lock-step between sync points, so this checks
// indexing, barrier placement and state handling, not performance, memory
// ordering or races; streams, events and graphs are ignored (launches run to
// completion before they return); device math intrinsics are their libm
// counterparts, so results can differ from a GPU's in the last bits. Host
// memory stands in for device memory. One OS thread at a time.
#ifndef SEQBOAT_TOOLS_CUDA_EMU_EMULATOR_H_
#define SEQBOAT_TOOLS_CUDA_EMU_EMULATOR_H_

#include <cuda_runtime_api.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace seqboat::emu {

constexpr int kWarpSize = 32;

// A barrier that counts arrivals of the threads it waits for; `gen` moves on
// when the last one arrives, which is what waiting threads watch.
struct Barrier {
  int arrived = 0;
  int64_t gen = 0;
};

// A suspended execution context: its saved stack pointer (x86-64, where a
// hand-written switch saves only the callee-saved registers and costs a few
// nanoseconds) or a ucontext elsewhere (whose switch also saves the signal
// mask, a system call each time).
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

struct EmulatedThread {
  Context context;
  bool done = false;
  bool waited_for_prior_grids = false;
  const Barrier* waiting_on = nullptr;  // null: runnable
  int64_t waiting_gen = 0;
};

// All of the emulation's state: the running launch, its block and threads,
// and what the runtime calls set.
struct Emulation {
  uint3 thread_idx{0, 0, 0};
  uint3 block_idx{0, 0, 0};
  dim3 block_dim;
  dim3 grid_dim;

  const std::function<void()>* body = nullptr;
  int nthreads = 0;
  int current = 0;  // linear thread index in the block
  int live = 0;     // threads of the block that have not returned
  std::vector<EmulatedThread> threads;
  std::vector<std::unique_ptr<char[]>> stacks;
  Context scheduler;
  Barrier block_barrier;
  std::vector<Barrier> warp_barriers;
  std::vector<int> warp_live;
  // Per warp, two rounds of 32 lane values: a lane writes the next round's
  // half only after every lane left the previous barrier.
  std::vector<uint64_t> exchange;

  std::unique_ptr<std::max_align_t[]> dynamic_shared;
  size_t dynamic_shared_bytes = 0;
  std::map<const void*, int> max_dynamic_shared;

  cudaError_t last_error = cudaSuccess;
  std::string failures;  // launch errors, for tests (TakeFailures)
  int64_t launches = 0;
  // Launches made early (launch.cuh SEQBOAT_LAUNCH_EARLY with early true);
  // `early` while one runs. `must_wait` while a launch runs whose threads
  // must each call WaitForPriorGrids: an early one, or one on a LaunchQueue
  // (SEQBOAT_LAUNCH_ON), which may be early on a GPU.
  int64_t early_launches = 0;
  bool early = false;
  bool must_wait = false;
  // Every PrefetchL2 since a test cleared them: where and how many bytes.
  struct Prefetch {
    const void* at;
    uint32_t bytes;
  };
  std::vector<Prefetch> prefetches;
  // The kernel expression of the last launch as written in the .cu file
  // (e.g. "GemvKernel<N, true>"): tests check which variant a launcher took.
  std::string last_kernel;
  int64_t context_switches = 0;
};

Emulation& State();

// Runs `body` as every thread of every block of the grid. A launch the
// hardware would refuse runs nothing and sets the last error.
void RunGrid(const void* kernel, const char* name, dim3 grid, dim3 block,
             size_t shared_bytes, const std::function<void()>& body);

// The current block's dynamic shared array.
void* DynamicSharedMemory();

// __syncthreads.
void SyncBlock();

// launch.cuh's device calls of an early launch: the wait, which every thread
// of an early launch or one on a LaunchQueue must make (a thread returning
// without it aborts), and
// the L2 prefetch, checked for its alignment and size and recorded.
void WaitForPriorGrids();
void PrefetchL2(const void* p, uint32_t bytes);
// Every lane's value of one full-mask warp exchange; valid until the calling
// lane's next warp operation.
const uint64_t* WarpExchange(unsigned mask, uint64_t mine, const char* what);

// Launch errors since the last call, one line each ("" when none), and
// cudaGetLastError's sticky error is cleared too.
std::string TakeFailures();

}  // namespace seqboat::emu

#endif  // SEQBOAT_TOOLS_CUDA_EMU_EMULATOR_H_
