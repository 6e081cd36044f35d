// Prints what the disk tier costs per snapshot at a few state sizes: a write
// (checksum, write, rename) on the writer thread, and a read back (read,
// checksum) as a restore does. No assertions; figures for the README.
//   bazel run -c opt //engine/state:snapshot_disk_bench -- [dir]
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "engine/state/snapshot_disk.h"

int main(int argc, char** argv) {
  using namespace seqboat;
  const std::string dir =
      argc > 1 ? argv[1]
               : (std::filesystem::temp_directory_path() / "snapshot_bench")
                     .string();
  for (int64_t state_bytes : {int64_t{64} << 10, int64_t{1} << 20,
                              int64_t{16} << 20, int64_t{64} << 20}) {
    std::filesystem::remove_all(dir);
    SnapshotDiskOptions o;
    o.dir = dir;
    o.budget_bytes = int64_t{4} << 30;
    o.identity = 1;
    o.state_bytes = state_bytes;
    auto disk = SnapshotDisk::Open(o);
    if (!disk.ok()) {
      std::fprintf(stderr, "%s\n", disk.status().ToString().c_str());
      return 1;
    }
    constexpr int kSnapshots = 8;
    std::shared_ptr<uint8_t> state(new uint8_t[state_bytes],
                                   std::default_delete<uint8_t[]>());
    for (int64_t i = 0; i < state_bytes; ++i) state.get()[i] = i * 7 & 0xff;
    std::vector<std::vector<int32_t>> keys;
    const absl::Time w0 = absl::Now();
    for (int k = 0; k < kSnapshots; ++k) {
      auto snap = std::make_shared<PrefixSnapshot>();
      snap->tokens.assign(2000, k);
      snap->state = state;
      snap->state_bytes = state_bytes;
      keys.push_back(snap->tokens);
      (*disk)->Write(snap, /*wait=*/true);
    }
    (*disk)->Flush();
    const double write_ms =
        absl::ToDoubleMilliseconds(absl::Now() - w0) / kSnapshots;
    std::vector<uint8_t> back(state_bytes);
    const absl::Time r0 = absl::Now();
    for (const auto& key : keys) {
      if (!(*disk)->Read(key, "", back.data()).ok()) return 1;
    }
    const double read_ms =
        absl::ToDoubleMilliseconds(absl::Now() - r0) / kSnapshots;
    std::printf(
        "state %8lld KiB: write %8.2f ms (%6.0f MB/s), read+verify %8.2f ms "
        "(%6.0f MB/s)\n",
        static_cast<long long>(state_bytes >> 10), write_ms,
        state_bytes / 1e3 / write_ms, read_ms, state_bytes / 1e3 / read_ms);
  }
  std::filesystem::remove_all(dir);
  return 0;
}
