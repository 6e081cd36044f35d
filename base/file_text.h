// Reads a whole file as text, refusing files larger than the caller's bound
// so that a wrong path (a device, a multi-gigabyte file) cannot exhaust
// memory. Errors name the file.
#ifndef SEQBOAT_BASE_FILE_TEXT_H_
#define SEQBOAT_BASE_FILE_TEXT_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace seqboat {

// NOT_FOUND when the file is absent, the errno's status when it cannot be
// opened otherwise, INVALID_ARGUMENT past max_bytes, DATA_LOSS on a read
// error.
absl::StatusOr<std::string> ReadFileText(const std::string& path,
                                         int64_t max_bytes);

}  // namespace seqboat

#endif  // SEQBOAT_BASE_FILE_TEXT_H_
