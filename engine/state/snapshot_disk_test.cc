#include "engine/state/snapshot_disk.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace seqboat {
namespace {

constexpr int64_t kStateBytes = 4096;

std::string FreshDir(const std::string& name) {
  const std::string dir = absl::StrCat(testing::TempDir(), "/", name);
  std::filesystem::remove_all(dir);
  return dir;
}

std::vector<int32_t> Tokens(int len, int salt) {
  std::vector<int32_t> t(len);
  for (int i = 0; i < len; ++i) t[i] = (i * 31 + salt * 7 + 3) % 1000;
  return t;
}

// A snapshot whose state bytes are a pattern of `salt`.
std::shared_ptr<const PrefixSnapshot> Snap(std::vector<int32_t> tokens,
                                           int salt,
                                           const std::string& scope = "") {
  auto snap = std::make_shared<PrefixSnapshot>();
  snap->scope = scope;
  snap->tokens = std::move(tokens);
  std::shared_ptr<uint8_t> state(new uint8_t[kStateBytes],
                                 std::default_delete<uint8_t[]>());
  for (int64_t i = 0; i < kStateBytes; ++i) {
    state.get()[i] = static_cast<uint8_t>((i * 131 + salt * 17) & 0xff);
  }
  snap->state = state;
  snap->state_bytes = kStateBytes;
  return snap;
}

std::unique_ptr<SnapshotDisk> OpenDisk(const std::string& dir, int64_t budget,
                                       uint64_t identity = 42) {
  SnapshotDiskOptions o;
  o.dir = dir;
  o.budget_bytes = budget;
  o.identity = identity;
  o.state_bytes = kStateBytes;
  auto d = SnapshotDisk::Open(o);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *std::move(d) : nullptr;
}

std::vector<std::string> SnapFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& de : std::filesystem::directory_iterator(dir)) {
    out.push_back(de.path().string());
  }
  return out;
}

TEST(SnapshotDiskTest, RoundTripIsByteExactAndSurvivesReopen) {
  const std::string dir = FreshDir("round_trip");
  auto want = Snap(Tokens(50, 1), 1, "tenant-a");
  {
    auto disk = OpenDisk(dir, 1 << 20);
    ASSERT_TRUE(disk->Write(want));
    disk->Flush();
    EXPECT_EQ(disk->Stats().writes, 1);
    EXPECT_EQ(disk->Stats().files, 1);
  }
  auto disk = OpenDisk(dir, 1 << 20);  // a restarted process
  EXPECT_EQ(disk->Stats().files, 1);
  std::vector<int32_t> prompt = want->tokens;
  prompt.push_back(7);
  prompt.push_back(8);
  EXPECT_EQ(disk->MatchLength(prompt, prompt.size(), "tenant-a"), 50u);
  // Another scope, a shorter bound or a longer floor find nothing.
  EXPECT_EQ(disk->MatchLength(prompt, prompt.size(), "tenant-b"), 0u);
  EXPECT_EQ(disk->MatchLength(prompt, 49, "tenant-a"), 0u);
  EXPECT_EQ(disk->MatchLength(prompt, prompt.size(), "tenant-a", 50), 0u);
  std::vector<uint8_t> got(kStateBytes, 0);
  ASSERT_TRUE(disk->Read(want->tokens, "tenant-a", got.data()).ok());
  EXPECT_EQ(0, std::memcmp(got.data(), want->state.get(), kStateBytes));
  EXPECT_EQ(disk->Stats().hits, 1);
  EXPECT_EQ(disk->Stats().hit_tokens, 50);
  EXPECT_EQ(disk->Read(Tokens(50, 2), "tenant-a", got.data()).code(),
            absl::StatusCode::kNotFound);
}

TEST(SnapshotDiskTest, LongestPrefixWins) {
  auto disk = OpenDisk(FreshDir("longest"), 1 << 20);
  const std::vector<int32_t> all = Tokens(80, 3);
  for (int len : {10, 40, 70}) {
    ASSERT_TRUE(disk->Write(
        Snap(std::vector<int32_t>(all.begin(), all.begin() + len), len), true));
  }
  disk->Flush();
  EXPECT_EQ(disk->MatchLength(all, all.size(), ""), 70u);
  EXPECT_EQ(disk->MatchLength(all, 69, ""), 40u);
  EXPECT_EQ(disk->MatchLength(all, all.size(), "", 70), 0u);
  std::vector<int32_t> other = all;
  other[20] += 1;  // diverges inside the longer two
  EXPECT_EQ(disk->MatchLength(other, other.size(), ""), 10u);
}

TEST(SnapshotDiskTest, BudgetEvictsLeastRecentlyUsed) {
  const std::string dir = FreshDir("budget");
  const int64_t per_file = SnapshotFileBytes(0, 20, kStateBytes);
  auto disk = OpenDisk(dir, 3 * per_file);
  for (int i = 0; i < 3; ++i)
    ASSERT_TRUE(disk->Write(Snap(Tokens(20, i), i), true));
  disk->Flush();
  std::vector<uint8_t> buf(kStateBytes);
  // Reading 0 makes 1 the least recently used.
  ASSERT_TRUE(disk->Read(Tokens(20, 0), "", buf.data()).ok());
  ASSERT_TRUE(disk->Write(Snap(Tokens(20, 3), 3), true));
  disk->Flush();
  const SnapshotDiskStats st = disk->Stats();
  EXPECT_EQ(st.files, 3);
  EXPECT_EQ(st.evicted, 1);
  EXPECT_LE(st.bytes, 3 * per_file);
  EXPECT_EQ(SnapFiles(dir).size(), 3u);
  EXPECT_EQ(disk->Read(Tokens(20, 1), "", buf.data()).code(),
            absl::StatusCode::kNotFound);
  for (int i : {0, 2, 3})
    EXPECT_TRUE(disk->Read(Tokens(20, i), "", buf.data()).ok()) << i;
  // One larger than the whole budget is never written.
  auto big = OpenDisk(FreshDir("budget_small"), per_file - 1);
  big->Write(Snap(Tokens(20, 9), 9), true);
  big->Flush();
  EXPECT_EQ(big->Stats().files, 0);
  // Reopened under a smaller budget, the oldest files go.
  disk.reset();
  auto smaller = OpenDisk(dir, 2 * per_file);
  EXPECT_EQ(smaller->Stats().files, 2);
  EXPECT_EQ(SnapFiles(dir).size(), 2u);
}

TEST(SnapshotDiskTest, FullQueueDropsAndCounts) {
  SnapshotDiskOptions o;
  o.dir = FreshDir("queue");
  o.budget_bytes = 1 << 24;
  o.identity = 1;
  o.state_bytes = kStateBytes;
  o.queue_depth = 1;
  auto disk = *SnapshotDisk::Open(o);
  int accepted = 0;
  for (int i = 0; i < 200; ++i) accepted += disk->Write(Snap(Tokens(30, i), i));
  disk->Flush();
  const SnapshotDiskStats st = disk->Stats();
  EXPECT_EQ(st.dropped + accepted, 200);
  EXPECT_EQ(st.writes, accepted);
  EXPECT_GE(accepted, 1);
}

// Writes one snapshot to `dir` and returns its file's path.
std::string WriteOneFile(const std::string& dir, uint64_t identity = 42) {
  auto disk = OpenDisk(dir, 1 << 20, identity);
  disk->Write(Snap(Tokens(25, 5), 5), true);
  disk->Flush();
  auto files = SnapFiles(dir);
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? "" : files[0];
}

TEST(SnapshotDiskTest, CorruptFileIsRefusedDeletedAndCounted) {
  const std::string dir = FreshDir("corrupt");
  const std::string path = WriteOneFile(dir);
  {
    // One bit of the state flipped: only the checksum sees it.
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    char c = 0;
    f.read(&c, 1);
    f.seekp(200);
    c ^= 0x10;
    f.write(&c, 1);
  }
  auto disk = OpenDisk(dir, 1 << 20);
  EXPECT_EQ(disk->Stats().files, 1);  // the scan reads headers only
  std::vector<uint8_t> buf(kStateBytes);
  EXPECT_EQ(disk->Read(Tokens(25, 5), "", buf.data()).code(),
            absl::StatusCode::kDataLoss);
  const SnapshotDiskStats st = disk->Stats();
  EXPECT_EQ(st.refused[static_cast<int>(SnapshotRefusal::kCorrupt)], 1);
  EXPECT_EQ(st.files, 0);
  EXPECT_EQ(st.hits, 0);
  EXPECT_TRUE(SnapFiles(dir).empty());
  EXPECT_EQ(disk->MatchLength(Tokens(25, 5), 25, ""), 0u);
}

TEST(SnapshotDiskTest, TruncatedFileIsRefusedAtScanAndDeleted) {
  const std::string dir = FreshDir("truncated");
  const std::string path = WriteOneFile(dir);
  ASSERT_EQ(truncate(path.c_str(), 100), 0);
  auto disk = OpenDisk(dir, 1 << 20);
  const SnapshotDiskStats st = disk->Stats();
  EXPECT_EQ(st.files, 0);
  EXPECT_EQ(st.refused[static_cast<int>(SnapshotRefusal::kTruncated)], 1);
  EXPECT_TRUE(SnapFiles(dir).empty());
}

TEST(SnapshotDiskTest, TruncatedAfterScanIsRefusedOnRead) {
  const std::string dir = FreshDir("truncated_late");
  const std::string path = WriteOneFile(dir);
  auto disk = OpenDisk(dir, 1 << 20);
  ASSERT_EQ(disk->Stats().files, 1);
  ASSERT_EQ(truncate(path.c_str(), 300), 0);
  std::vector<uint8_t> buf(kStateBytes);
  EXPECT_EQ(disk->Read(Tokens(25, 5), "", buf.data()).code(),
            absl::StatusCode::kDataLoss);
  EXPECT_EQ(
      disk->Stats().refused[static_cast<int>(SnapshotRefusal::kTruncated)], 1);
  EXPECT_TRUE(SnapFiles(dir).empty());
}

TEST(SnapshotDiskTest, ForeignIdentityAndStrangersAreRefused) {
  const std::string dir = FreshDir("foreign");
  WriteOneFile(dir, /*identity=*/7);  // another model's
  std::ofstream(dir + "/0000000000000000-3.snap") << "not a snapshot at all, "
                                                     "but long enough to read";
  std::ofstream(dir + "/.tmp-0000000000000001-3") << "a write cut off";
  std::ofstream(dir + "/README") << "left alone";
  auto disk = OpenDisk(dir, 1 << 20, /*identity=*/42);
  const SnapshotDiskStats st = disk->Stats();
  EXPECT_EQ(st.files, 0);
  EXPECT_EQ(st.refused[static_cast<int>(SnapshotRefusal::kIdentity)], 1);
  EXPECT_EQ(st.refused[static_cast<int>(SnapshotRefusal::kFormat)], 1);
  EXPECT_EQ(SnapFiles(dir), std::vector<std::string>{dir + "/README"});
}

TEST(SnapshotDiskTest, ConcurrentReadersWhileWriting) {
  const int64_t per_file = SnapshotFileBytes(0, 40, kStateBytes);
  auto disk = OpenDisk(FreshDir("concurrent"), 12 * per_file);
  for (int i = 0; i < 8; ++i)
    ASSERT_TRUE(disk->Write(Snap(Tokens(40, i), i), true));
  disk->Flush();
  std::atomic<int> wrong{0}, served{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 6; ++t) {
    readers.emplace_back([&, t] {
      std::vector<uint8_t> buf(kStateBytes);
      for (int round = 0; round < 100; ++round) {
        const int i = (t + round) % 8;
        const absl::Status s = disk->Read(Tokens(40, i), "", buf.data());
        if (!s.ok()) {
          // Only an eviction by the writer below may make one go.
          if (s.code() != absl::StatusCode::kNotFound) ++wrong;
          continue;
        }
        ++served;
        auto want = Snap(Tokens(40, i), i);
        if (std::memcmp(buf.data(), want->state.get(), kStateBytes) != 0) {
          ++wrong;
        }
      }
    });
  }
  // New snapshots evict old ones while the readers run.
  for (int i = 8; i < 20; ++i) disk->Write(Snap(Tokens(40, i), i), true);
  for (auto& r : readers) r.join();
  disk->Flush();
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_GT(served.load(), 0);
  const SnapshotDiskStats st = disk->Stats();
  for (int64_t r : st.refused) EXPECT_EQ(r, 0);
  EXPECT_LE(st.bytes, 12 * per_file);
}

TEST(SnapshotDiskTest, ReadAsyncDeliversOnItsThread) {
  auto disk = OpenDisk(FreshDir("async"), 1 << 20);
  auto want = Snap(Tokens(33, 4), 4);
  disk->Write(want, true);
  disk->Flush();
  std::shared_ptr<uint8_t> block(new uint8_t[kStateBytes],
                                 std::default_delete<uint8_t[]>());
  std::promise<absl::Status> done;
  disk->ReadAsync(want->tokens, "", block,
                  [&](absl::Status s) { done.set_value(s); });
  ASSERT_TRUE(done.get_future().get().ok());
  EXPECT_EQ(0, std::memcmp(block.get(), want->state.get(), kStateBytes));
}

TEST(SnapshotDiskTest, BadOptionsAreRefused) {
  SnapshotDiskOptions o;
  o.dir = FreshDir("bad");
  o.budget_bytes = 0;
  EXPECT_EQ(SnapshotDisk::Open(o).status().code(),
            absl::StatusCode::kInvalidArgument);
  o.budget_bytes = 1 << 20;
  o.dir = "/proc/self/no_such_place/snapshots";
  EXPECT_EQ(SnapshotDisk::Open(o).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// The wire format is the file format: the bytes a replica exports are the
// file's bytes, and decode checks them as a read checks a file.
TEST(SnapshotFileTest, EncodedBytesAreTheFileAndDecodeBack) {
  const std::string dir = FreshDir("encode");
  std::filesystem::create_directories(dir);
  auto want = Snap(Tokens(33, 5), 5, "scope-x");
  const std::string bytes = EncodeSnapshot(42, *want);
  const std::string path = dir + "/a.snap";
  ASSERT_TRUE(WriteSnapshotFile(path, path + ".tmp", 42, *want).ok());
  std::ifstream in(path, std::ios::binary);
  const std::string file((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes, file);
  EXPECT_EQ(static_cast<int64_t>(bytes.size()),
            SnapshotFileBytes(7, 33, kStateBytes));
  SnapshotFileInfo info;
  std::vector<uint8_t> state(kStateBytes);
  ASSERT_EQ(DecodeSnapshot(bytes, 42, kStateBytes, &info, state.data()),
            SnapshotRefusal::kNone);
  EXPECT_EQ(info.scope, "scope-x");
  EXPECT_EQ(info.tokens, want->tokens);
  EXPECT_EQ(0, std::memcmp(state.data(), want->state.get(), kStateBytes));
}

TEST(SnapshotFileTest, DecodeRefusesWhatIsNotThisModelsWholeSnapshot) {
  const std::string bytes = EncodeSnapshot(42, *Snap(Tokens(20, 6), 6));
  SnapshotFileInfo info;
  std::vector<uint8_t> state(kStateBytes);
  auto decode = [&](const std::string& b, uint64_t identity = 42,
                    int64_t state_bytes = kStateBytes) {
    return DecodeSnapshot(b, identity, state_bytes, &info, state.data());
  };
  EXPECT_EQ(decode(bytes, 43), SnapshotRefusal::kIdentity);
  EXPECT_EQ(decode(bytes, 42, kStateBytes / 2), SnapshotRefusal::kIdentity);
  EXPECT_EQ(decode(bytes.substr(0, bytes.size() - 1)),
            SnapshotRefusal::kTruncated);
  EXPECT_EQ(decode(bytes.substr(0, 10)), SnapshotRefusal::kTruncated);
  EXPECT_EQ(decode(bytes + "x"), SnapshotRefusal::kTruncated);
  EXPECT_EQ(decode(""), SnapshotRefusal::kTruncated);
  std::string flipped = bytes;
  flipped[bytes.size() - 100] ^= 0x20;
  EXPECT_EQ(decode(flipped), SnapshotRefusal::kCorrupt);
  std::string stranger = bytes;
  stranger[0] = 'X';
  EXPECT_EQ(decode(stranger), SnapshotRefusal::kFormat);
}

TEST(SnapshotFileTest, Crc32cKnownAnswer) {
  // The standard check value of CRC-32C.
  EXPECT_EQ(Crc32c(0, "123456789", 9), 0xe3069283u);
  // Split anywhere, the same.
  EXPECT_EQ(Crc32c(Crc32c(0, "1234", 4), "56789", 5), 0xe3069283u);
}

}  // namespace
}  // namespace seqboat
