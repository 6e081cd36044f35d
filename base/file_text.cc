#include "base/file_text.h"

#include <cerrno>
#include <cstdio>
#include <memory>

#include "absl/strings/str_cat.h"

namespace seqboat {

absl::StatusOr<std::string> ReadFileText(const std::string& path,
                                         int64_t max_bytes) {
  std::unique_ptr<FILE, int (*)(FILE*)> file(std::fopen(path.c_str(), "rb"),
                                             &std::fclose);
  if (file == nullptr) {
    return absl::ErrnoToStatus(errno, absl::StrCat(path, ": cannot open"));
  }
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0) {
    text.append(buffer, n);
    if (static_cast<int64_t>(text.size()) > max_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": larger than ", max_bytes, " bytes"));
    }
  }
  if (std::ferror(file.get())) {
    return absl::DataLossError(absl::StrCat(path, ": read error"));
  }
  return text;
}

}  // namespace seqboat
