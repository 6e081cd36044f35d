// SafetensorsFile::Open on arbitrary file contents. Either it fails with a
// status, or every tensor it hands out describes bytes of the file that the
// header's data_offsets name, with nbytes = elements x dtype size, at no
// overlap with another tensor.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "fuzz/fuzz_check.h"
#include "weights/safetensors.h"

namespace {

// Open() takes a path and maps the file, so the input is written to one
// in-memory file that lives for the whole run: no disk traffic per input.
int InputFile() {
  static const int fd = memfd_create("safetensors_fuzzer", MFD_CLOEXEC);
  FUZZ_CHECK(fd >= 0, "memfd_create failed");
  return fd;
}

void WriteInput(int fd, const uint8_t* data, size_t size) {
  FUZZ_CHECK(ftruncate(fd, 0) == 0);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = pwrite(fd, data + done, size - done, done);
    FUZZ_CHECK(n > 0, "pwrite failed");
    done += static_cast<size_t>(n);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = InputFile();
  WriteInput(fd, data, size);
  auto file =
      seqboat::SafetensorsFile::Open("/proc/self/fd/" + std::to_string(fd));
  if (!file.ok()) {
    FUZZ_CHECK(!file.status().message().empty());
    return 0;
  }

  // The file opened, so it has a header length and a JSON object header.
  FUZZ_CHECK(size >= 8);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
  FUZZ_CHECK(header_len <= size - 8);
  const char* header = reinterpret_cast<const char*>(data + 8);
  const nlohmann::json json =
      nlohmann::json::parse(header, header + header_len, nullptr, false);
  FUZZ_CHECK(json.is_object());
  const uint8_t* data_section = data + 8 + header_len;
  const uint64_t data_size = size - 8 - header_len;

  const auto& tensors = (*file)->tensors();
  size_t entries = json.size() - (json.contains("__metadata__") ? 1 : 0);
  FUZZ_CHECK(tensors.size() == entries);
  uint64_t covered_end = 0;
  for (const seqboat::TensorView& view : tensors) {
    FUZZ_CHECK((*file)->Find(view.name) == &view);
    const int64_t numel = seqboat::NumElements(view.shape);
    FUZZ_CHECK(numel >= 0);
    FUZZ_CHECK(view.nbytes ==
               static_cast<size_t>(numel) * seqboat::DTypeSize(view.dtype));
    const nlohmann::json& offsets = json.at(view.name).at("data_offsets");
    const uint64_t begin = offsets.at(0).get<uint64_t>();
    const uint64_t end = offsets.at(1).get<uint64_t>();
    FUZZ_CHECK(begin <= end && end <= data_size && end - begin == view.nbytes);
    // The view's bytes are the file's bytes at those offsets.
    FUZZ_CHECK(std::memcmp(view.data, data_section + begin, view.nbytes) == 0);
    // tensors() is sorted by offset and non-empty tensors do not overlap.
    if (view.nbytes > 0) {
      FUZZ_CHECK(begin >= covered_end, "\"%s\" overlaps", view.name.c_str());
      covered_end = end;
    }
  }
  return 0;
}
