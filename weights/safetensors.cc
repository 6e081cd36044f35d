#include "weights/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/json_reader.h"

namespace seqboat {
namespace {

using nlohmann::json;

// Real headers are kilobytes; anything this large is corruption or an attack
// on our memory, and parsing it would be slow.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

constexpr struct {
  DType dtype;
  std::string_view name;
  size_t size;
} kDTypes[] = {
    {DType::kF32, "F32", 4},   {DType::kF16, "F16", 2},
    {DType::kBF16, "BF16", 2}, {DType::kF64, "F64", 8},
    {DType::kI64, "I64", 8},   {DType::kI32, "I32", 4},
    {DType::kI16, "I16", 2},   {DType::kI8, "I8", 1},
    {DType::kU8, "U8", 1},     {DType::kBool, "BOOL", 1},
};

// Parses `text`, failing on malformed JSON and on a key repeated within one
// object (nlohmann keeps the last, which would hide a conflicting entry).
absl::Status ParseHeaderJson(std::string_view text, json* out,
                             std::string* duplicate) {
  if (absl::Status depth = CheckJsonDepth(text); !depth.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("header ", depth.message()));
  }
  std::vector<std::set<std::string>> open_objects;
  json::parser_callback_t callback =
      [&](int /*depth*/, json::parse_event_t event, json& parsed) {
        switch (event) {
          case json::parse_event_t::object_start:
            open_objects.emplace_back();
            break;
          case json::parse_event_t::object_end:
            if (!open_objects.empty()) open_objects.pop_back();
            break;
          case json::parse_event_t::key:
            if (!open_objects.empty() && parsed.is_string() &&
                !open_objects.back().insert(parsed.get<std::string>()).second &&
                duplicate->empty()) {
              *duplicate = parsed.get<std::string>();
            }
            break;
          default:
            break;
        }
        return true;
      };
  *out = json::parse(text.begin(), text.end(), callback,
                     /*allow_exceptions=*/false);
  if (out->is_discarded()) {
    return absl::InvalidArgumentError("header is not valid JSON");
  }
  return absl::OkStatus();
}

// A JSON integer in [0, INT64_MAX], else false.
bool NonNegativeInt64(const json& value, int64_t* out) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return false;
    }
    *out = static_cast<int64_t>(v);
    return true;
  }
  if (value.is_number_integer()) {
    int64_t v = value.get<int64_t>();
    if (v < 0) return false;
    *out = v;
    return true;
  }
  return false;
}

struct Range {
  uint64_t begin;
  uint64_t end;
};

// Validates one header entry; fills `view` (data left null) and `range`.
absl::Status ParseEntry(const std::string& name, const json& entry,
                        uint64_t data_size, TensorView* view, Range* range) {
  if (!entry.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat("entry must be an object, got ", BriefJson(entry)));
  }
  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end() || !dtype_it->is_string()) {
    return absl::InvalidArgumentError("\"dtype\" missing or not a string");
  }
  const std::string dtype_name = dtype_it->get<std::string>();
  if (!ParseDType(dtype_name, &view->dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown dtype \"", dtype_name, "\""));
  }

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end() || !shape_it->is_array()) {
    return absl::InvalidArgumentError("\"shape\" missing or not an array");
  }
  int64_t numel = 1;
  for (const json& dim : *shape_it) {
    int64_t d = 0;
    if (!dim.is_number_integer()) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape dims must be integers, got ", BriefJson(dim)));
    }
    if (!NonNegativeInt64(dim, &d)) {
      return absl::InvalidArgumentError(
          absl::StrCat("shape dims must be non-negative and fit int64, got ",
                       BriefJson(dim)));
    }
    if (__builtin_mul_overflow(numel, d, &numel)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "element count of shape ", BriefJson(*shape_it), " overflows"));
    }
    view->shape.push_back(d);
  }
  uint64_t nbytes = 0;
  if (__builtin_mul_overflow(static_cast<uint64_t>(numel),
                             static_cast<uint64_t>(DTypeSize(view->dtype)),
                             &nbytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "byte size of shape ", BriefJson(*shape_it), " overflows"));
  }

  auto offsets_it = entry.find("data_offsets");
  int64_t begin = 0;
  int64_t end = 0;
  if (offsets_it == entry.end() || !offsets_it->is_array() ||
      offsets_it->size() != 2 || !NonNegativeInt64((*offsets_it)[0], &begin) ||
      !NonNegativeInt64((*offsets_it)[1], &end)) {
    return absl::InvalidArgumentError(
        "\"data_offsets\" must be [begin, end] of non-negative integers");
  }
  if (begin > end) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_offsets [", begin, ", ", end, "] has begin > end"));
  }
  if (static_cast<uint64_t>(end) > data_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_offsets [", begin, ", ", end,
                     "] runs past the data region of ", data_size, " bytes"));
  }
  if (static_cast<uint64_t>(end - begin) != nbytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("data_offsets [", begin, ", ", end, "] span ", end - begin,
                     " bytes but ", AbslView(DTypeName(view->dtype)), " ",
                     ShapeString(view->shape), " needs ", nbytes));
  }
  view->name = name;
  view->nbytes = static_cast<size_t>(nbytes);
  *range = {static_cast<uint64_t>(begin), static_cast<uint64_t>(end)};
  return absl::OkStatus();
}

}  // namespace

size_t DTypeSize(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.size;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  for (const auto& d : kDTypes) {
    if (d.dtype == dtype) return d.name;
  }
  return "?";
}

bool ParseDType(std::string_view name, DType* dtype) {
  for (const auto& d : kDTypes) {
    if (d.name == name) {
      *dtype = d.dtype;
      return true;
    }
  }
  return false;
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(
    const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    return absl::ErrnoToStatus(err, absl::StrCat(path, ": cannot stat"));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file"));
  }
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) {
    close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": file is ", size,
                     " bytes, shorter than the 8-byte header "
                     "length"));
  }
  void* base = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int mmap_errno = errno;
  close(fd);  // the mapping keeps the file alive
  if (base == MAP_FAILED) {
    return absl::ErrnoToStatus(mmap_errno, absl::StrCat(path, ": cannot mmap"));
  }
  // From here on the destructor unmaps on every return path.
  std::unique_ptr<SafetensorsFile> file(
      new SafetensorsFile(path, base, static_cast<size_t>(size)));
  auto fail = [&path](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", message));
  };

  const auto* bytes = static_cast<const unsigned char*>(base);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len == 0) return fail("header length is 0");
  if (header_len > kMaxHeaderBytes) {
    return fail(absl::StrCat("header length ", header_len,
                             " exceeds the limit of ", kMaxHeaderBytes));
  }
  if (header_len > size - 8) {
    return fail(absl::StrCat("header length ", header_len,
                             " runs past the end of the file (", size,
                             " bytes)"));
  }
  const uint64_t data_start = 8 + header_len;
  const uint64_t data_size = size - data_start;

  json header;
  std::string duplicate;
  absl::Status parsed = ParseHeaderJson(
      std::string_view(reinterpret_cast<const char*>(bytes + 8), header_len),
      &header, &duplicate);
  if (!parsed.ok()) return fail(parsed.message());
  if (!header.is_object()) return fail("header is not a JSON object");
  if (!duplicate.empty()) {
    return fail(absl::StrCat("duplicate key \"", duplicate, "\" in header"));
  }

  std::vector<Range> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__") {
      if (!it->is_object()) return fail("__metadata__ is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return fail(
              absl::StrCat("__metadata__ \"", m.key(), "\" is not a string"));
        }
        file->metadata_[m.key()] = m->get<std::string>();
      }
      continue;
    }
    TensorView view{};
    Range range{};
    absl::Status entry = ParseEntry(it.key(), *it, data_size, &view, &range);
    if (!entry.ok()) {
      return fail(absl::StrCat("tensor \"", it.key(), "\": ", entry.message()));
    }
    view.data = bytes + data_start + range.begin;
    file->tensors_.push_back(std::move(view));
    ranges.push_back(range);
  }

  // Sort by offset so overlap is a check between neighbours (empty tensors
  // occupy no bytes and may sit anywhere).
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (ranges[a].begin != ranges[b].begin) {
      return ranges[a].begin < ranges[b].begin;
    }
    return file->tensors_[a].name < file->tensors_[b].name;
  });
  uint64_t covered_end = 0;
  const TensorView* covering = nullptr;
  std::vector<TensorView> sorted;
  sorted.reserve(order.size());
  for (size_t i : order) {
    const Range& r = ranges[i];
    if (r.begin < r.end) {
      if (covering != nullptr && r.begin < covered_end) {
        return fail(absl::StrCat("tensors \"", covering->name, "\" and \"",
                                 file->tensors_[i].name,
                                 "\" have overlapping data_offsets"));
      }
      covered_end = r.end;
      covering = &file->tensors_[i];
    }
  }
  for (size_t i : order) sorted.push_back(std::move(file->tensors_[i]));
  file->tensors_ = std::move(sorted);
  for (size_t i = 0; i < file->tensors_.size(); ++i) {
    file->index_.emplace(file->tensors_[i].name, i);
  }
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (base_ != nullptr) munmap(base_, size_);
}

const TensorView* SafetensorsFile::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace seqboat
