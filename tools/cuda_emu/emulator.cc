#include "tools/cuda_emu/emulator.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#if defined(__x86_64__)
// SwitchStack(&from_sp, to_sp): pushes the callee-saved registers, saves the
// stack pointer, loads the other context's and pops its registers. MXCSR and
// the x87 control word are callee-saved too, but no kernel changes them.
extern "C" __attribute__((visibility("hidden"))) void SeqboatEmuSwitchStack(
    void** from_sp, void* to_sp);
asm(R"(
  .text
  .p2align 4
  .globl SeqboatEmuSwitchStack
  .hidden SeqboatEmuSwitchStack
  .type SeqboatEmuSwitchStack, @function
SeqboatEmuSwitchStack:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size SeqboatEmuSwitchStack, .-SeqboatEmuSwitchStack
)");
#endif

namespace seqboat::emu {
namespace {

void Switch(Context& from, Context& to) {
#if defined(__x86_64__)
  SeqboatEmuSwitchStack(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
}

// A context that starts in `entry`, which must never return.
void MakeContext(Context& c, char* stack, size_t bytes, void (*entry)()) {
#if defined(__x86_64__)
  // From the 16-byte aligned top: a null return address for `entry` (so it
  // starts with rsp = 8 mod 16, as after a call), `entry` for the switch's
  // ret, and six zero registers for its pops.
  auto top = reinterpret_cast<uintptr_t>(stack + bytes) & ~uintptr_t{15};
  void** sp = reinterpret_cast<void**>(top);
  *--sp = nullptr;
  *--sp = reinterpret_cast<void*>(entry);
  for (int i = 0; i < 6; ++i) *--sp = nullptr;
  c.sp = sp;
#else
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
#endif
}

// Kernels keep small register arrays in locals; 256 KiB leaves room for
// unoptimised frames. Pages are only touched as used.
constexpr size_t kStackBytes = 256 * 1024;
constexpr int kMaxBlockThreads = 1024;
constexpr size_t kDefaultSharedBytes = 48 * 1024;
constexpr size_t kMaxSharedBytes = 227 * 1024;  // H100 / H200 opt-in limit

[[noreturn]] void Fatal(const std::string& what) {
  const Emulation& s = State();
  std::fprintf(stderr,
               "CUDA emulation: %s (launch %lld, block (%u, %u, %u), thread "
               "(%u, %u, %u))\n",
               what.c_str(), static_cast<long long>(s.launches), s.block_idx.x,
               s.block_idx.y, s.block_idx.z, s.thread_idx.x, s.thread_idx.y,
               s.thread_idx.z);
  std::abort();
}

void Refuse(const char* name, cudaError_t error, const std::string& why) {
  Emulation& s = State();
  s.last_error = error;
  s.failures += std::string("launch of ") + name + " refused: " + why + "\n";
}

void Release(Barrier& b) {
  b.arrived = 0;
  ++b.gen;
}

int WarpOf(int t) { return t / kWarpSize; }

int LanesInWarp(const Emulation& s, int w) {
  const int left = s.nthreads - w * kWarpSize;
  return left < kWarpSize ? left : kWarpSize;
}

// Back to the scheduler until `b` moves past `gen`.
void WaitFor(const Barrier& b, int64_t gen) {
  Emulation& s = State();
  EmulatedThread& t = s.threads[s.current];
  t.waiting_on = &b;
  t.waiting_gen = gen;
  ++s.context_switches;
  Switch(t.context, s.scheduler);
}

void ThreadEntry() {
  Emulation& s = State();
  (*s.body)();
  const int t = s.current;
  if (s.must_wait && !s.threads[t].waited_for_prior_grids) {
    Fatal(
        "a thread of a launch on a LaunchQueue returned without "
        "WaitForPriorGrids");
  }
  if (s.early && !s.threads[t].waited_for_prior_grids) {
    Fatal("a thread of an early launch returned without WaitForPriorGrids");
  }
  s.threads[t].done = true;
  --s.live;
  --s.warp_live[WarpOf(t)];
  // Exited threads no longer hold back __syncthreads (as on sm_70+).
  if (s.block_barrier.arrived > 0 && s.block_barrier.arrived == s.live) {
    Release(s.block_barrier);
  }
  if (s.warp_barriers[WarpOf(t)].arrived > 0) {
    Fatal("a lane returned while its warp waits in a full-mask warp operation");
  }
  // Never resumed: the scheduler sees `done`.
  Switch(s.threads[t].context, s.scheduler);
  Fatal("a finished thread was resumed");
}

uint3 ThreadIndex(const dim3& block, int t) {
  const unsigned x = t % block.x;
  const unsigned y = (t / block.x) % block.y;
  const unsigned z = t / (block.x * block.y);
  return uint3{x, y, z};
}

void RunBlock(Emulation& s) {
  const int n = s.nthreads;
  s.live = n;
  s.block_barrier = Barrier{};
  const int warps = (n + kWarpSize - 1) / kWarpSize;
  s.warp_barriers.assign(warps, Barrier{});
  s.warp_live.assign(warps, 0);
  for (int w = 0; w < warps; ++w) s.warp_live[w] = LanesInWarp(s, w);
  if (s.dynamic_shared_bytes > 0) {
    std::memset(s.dynamic_shared.get(), 0xff, s.dynamic_shared_bytes);
  }
  for (int t = 0; t < n; ++t) {
    EmulatedThread& th = s.threads[t];
    th.done = false;
    th.waited_for_prior_grids = false;
    th.waiting_on = nullptr;
    MakeContext(th.context, s.stacks[t].get(), kStackBytes, ThreadEntry);
  }
  while (s.live > 0) {
    bool ran = false;
    for (int t = 0; t < n; ++t) {
      EmulatedThread& th = s.threads[t];
      if (th.done) continue;
      if (th.waiting_on != nullptr) {
        if (th.waiting_on->gen == th.waiting_gen) continue;
        th.waiting_on = nullptr;
      }
      s.current = t;
      s.thread_idx = ThreadIndex(s.block_dim, t);
      ++s.context_switches;
      Switch(s.scheduler, th.context);
      ran = true;
    }
    if (!ran) {
      for (int t = 0; t < n; ++t) {
        if (!s.threads[t].done) {
          s.current = t;
          s.thread_idx = ThreadIndex(s.block_dim, t);
          break;
        }
      }
      Fatal("deadlock: threads wait at a barrier the others never reach");
    }
  }
}

}  // namespace

Emulation& State() {
  static Emulation* state = new Emulation();
  return *state;
}

void RunGrid(const void* kernel, const char* name, dim3 grid, dim3 block,
             size_t shared_bytes, const std::function<void()>& body) {
  Emulation& s = State();
  if (s.body != nullptr) Fatal("a kernel launched another kernel");
  ++s.launches;
  if (s.early) ++s.early_launches;
  s.last_kernel = name;
  const int64_t threads = static_cast<int64_t>(block.x) * block.y * block.z;
  if (threads < 1 || threads > kMaxBlockThreads || block.z > 64) {
    Refuse(name, cudaErrorInvalidConfiguration,
           "block of " + std::to_string(block.x) + " x " +
               std::to_string(block.y) + " x " + std::to_string(block.z));
    return;
  }
  if (grid.x < 1 || grid.y < 1 || grid.z < 1 || grid.x > 0x7fffffffu ||
      grid.y > 65535 || grid.z > 65535) {
    Refuse(name, cudaErrorInvalidConfiguration,
           "grid of " + std::to_string(grid.x) + " x " +
               std::to_string(grid.y) + " x " + std::to_string(grid.z));
    return;
  }
  if (shared_bytes > kDefaultSharedBytes) {
    const auto it = s.max_dynamic_shared.find(kernel);
    const size_t allowed = it == s.max_dynamic_shared.end()
                               ? kDefaultSharedBytes
                               : static_cast<size_t>(it->second);
    if (shared_bytes > allowed || shared_bytes > kMaxSharedBytes) {
      Refuse(name, cudaErrorInvalidValue,
             std::to_string(shared_bytes) + " bytes of dynamic shared memory");
      return;
    }
  }
  s.body = &body;
  s.nthreads = static_cast<int>(threads);
  s.block_dim = block;
  s.grid_dim = grid;
  if (s.threads.size() < static_cast<size_t>(threads)) {
    s.threads.resize(threads);
  }
  while (s.stacks.size() < static_cast<size_t>(threads)) {
    s.stacks.emplace_back(new char[kStackBytes]);
  }
  const int warps = (s.nthreads + kWarpSize - 1) / kWarpSize;
  s.exchange.assign(static_cast<size_t>(warps) * 2 * kWarpSize, 0);
  if (shared_bytes > s.dynamic_shared_bytes) {
    s.dynamic_shared.reset(
        new std::max_align_t[(shared_bytes + sizeof(std::max_align_t) - 1) /
                             sizeof(std::max_align_t)]);
  }
  s.dynamic_shared_bytes = shared_bytes;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        s.block_idx = uint3{x, y, z};
        RunBlock(s);
      }
    }
  }
  s.body = nullptr;
}

void* DynamicSharedMemory() {
  Emulation& s = State();
  return s.dynamic_shared_bytes > 0 ? s.dynamic_shared.get() : nullptr;
}

void SyncBlock() {
  Emulation& s = State();
  Barrier& b = s.block_barrier;
  const int64_t gen = b.gen;
  if (++b.arrived == s.live) {
    Release(b);
    return;
  }
  WaitFor(b, gen);
}

void WaitForPriorGrids() {
  Emulation& s = State();
  s.threads[s.current].waited_for_prior_grids = true;
}

void PrefetchL2(const void* p, uint32_t bytes) {
  if ((reinterpret_cast<uintptr_t>(p) & 15) != 0 || bytes % 16 != 0 ||
      bytes == 0) {
    Fatal("PrefetchL2 of " + std::to_string(bytes) + " bytes at an address " +
          std::to_string(reinterpret_cast<uintptr_t>(p) % 16) +
          " bytes past 16-byte alignment: the size must be a positive "
          "multiple of 16 and the address aligned");
  }
  State().prefetches.push_back(Emulation::Prefetch{p, bytes});
}

const uint64_t* WarpExchange(unsigned mask, uint64_t mine, const char* what) {
  Emulation& s = State();
  const int t = s.current, w = WarpOf(t), lane = t % kWarpSize;
  if (mask != 0xffffffffu) {
    Fatal(std::string(what) + ": only full warp masks are emulated");
  }
  if (s.warp_live[w] != kWarpSize) {
    Fatal(std::string(what) + " with a full mask in a warp of " +
          std::to_string(s.warp_live[w]) + " live lanes");
  }
  Barrier& b = s.warp_barriers[w];
  const int64_t gen = b.gen;
  uint64_t* round =
      &s.exchange[(static_cast<size_t>(w) * 2 + (gen & 1)) * kWarpSize];
  round[lane] = mine;
  if (++b.arrived == kWarpSize) {
    Release(b);
  } else {
    WaitFor(b, gen);
  }
  return round;
}

std::string TakeFailures() {
  Emulation& s = State();
  std::string f;
  f.swap(s.failures);
  s.last_error = cudaSuccess;
  return f;
}

}  // namespace seqboat::emu
