#include "engine/backend/penalty_table.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

constexpr int kMinLog2 = 4;  // rooms of at least 16 ints

int Log2Ceil(int32_t n) {
  int log2 = kMinLog2;
  while ((int64_t{1} << log2) < n) ++log2;
  return log2;
}

}  // namespace

PenaltyTables::Room PenaltyTables::Allocate(int32_t n) {
  const int log2 = Log2Ceil(n);
  const int32_t capacity = int32_t{1} << log2;
  held_ += capacity;
  if (static_cast<size_t>(log2) < free_.size() && !free_[log2].empty()) {
    const int32_t offset = free_[log2].back();
    free_[log2].pop_back();
    return {offset, capacity};
  }
  const Room room{size_, capacity};
  size_ += capacity;
  return room;
}

void PenaltyTables::Free(Room room) {
  if (room.capacity <= 0) return;
  const int log2 = Log2Ceil(room.capacity);
  if (free_.size() <= static_cast<size_t>(log2)) free_.resize(log2 + 1);
  free_[log2].push_back(room.offset);
  held_ -= room.capacity;
}

PenaltyTableLease& PenaltyTableLease::operator=(
    const PenaltyTableLease& other) {
  if (this != &other) Release();
  return *this;
}

PenaltyTableLease::PenaltyTableLease(PenaltyTableLease&& other) noexcept
    : tables(std::exchange(other.tables, nullptr)),
      seen(std::exchange(other.seen, {})),
      counted(std::exchange(other.counted, {})),
      suppressed(std::exchange(other.suppressed, {})),
      seen_written(std::exchange(other.seen_written, 0)),
      counted_written(std::exchange(other.counted_written, 0)),
      recounted(std::move(other.recounted)),
      suppressed_changed(std::exchange(other.suppressed_changed, false)) {
  other.recounted.clear();
}

PenaltyTableLease& PenaltyTableLease::operator=(
    PenaltyTableLease&& other) noexcept {
  if (this != &other) {
    Release();
    tables = std::exchange(other.tables, nullptr);
    seen = std::exchange(other.seen, {});
    counted = std::exchange(other.counted, {});
    suppressed = std::exchange(other.suppressed, {});
    seen_written = std::exchange(other.seen_written, 0);
    counted_written = std::exchange(other.counted_written, 0);
    recounted = std::move(other.recounted);
    other.recounted.clear();
    suppressed_changed = std::exchange(other.suppressed_changed, false);
  }
  return *this;
}

void PenaltyTableLease::Release() {
  if (tables != nullptr) {
    tables->Free(seen);
    tables->Free(counted);
    tables->Free(suppressed);
  }
  tables = nullptr;
  seen = counted = suppressed = {};
  seen_written = counted_written = 0;
  recounted.clear();
  suppressed_changed = false;
}

absl::Status ApplyPenaltyTableUpdate(const SampleRowsParams& p,
                                     std::vector<int32_t>* table) {
  const PenaltyTableUpdate& update = p.table;
  if (update.size < 0 || update.write_count < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("penalty table of ", update.size, " ints with ",
                     update.write_count, " writes"));
  }
  if (static_cast<size_t>(update.size) > table->size()) {
    table->resize(static_cast<size_t>(update.size), 0);
  }
  for (int32_t i = 0; i < update.write_count; ++i) {
    const int32_t at = update.writes[2 * i];
    if (at < 0 || at >= update.size) {
      return absl::InvalidArgumentError(
          absl::StrCat("penalty table write ", i, " at ", at,
                       " outside the table of ", update.size, " ints"));
    }
    (*table)[static_cast<size_t>(at)] = update.writes[2 * i + 1];
  }
  const auto inside = [&](int32_t offset, int64_t n) {
    return n <= 0 || (offset >= 0 && offset + n <= update.size);
  };
  for (int j = 0; j < p.m; ++j) {
    const SampleRow& r = p.rows[j];
    if (!inside(r.seen_offset, r.seen_count) ||
        !inside(r.counted_offset, 2 * int64_t{r.counted_count}) ||
        !inside(r.suppressed_offset, r.suppressed_count)) {
      return absl::InvalidArgumentError(
          absl::StrCat("sample row ", j,
                       "'s penalised ids lie outside the penalty table of ",
                       update.size, " ints"));
    }
  }
  return absl::OkStatus();
}

}  // namespace seqboat
