// Early returns on error, in the style of gRPC's and Abseil's internal
// macros, so that a chain of fallible calls reads as the calls:
//
//   RETURN_IF_ERROR(reader.String("type", &type));
//   ASSIGN_OR_RETURN(Matrix w, backend.UploadMatrix(host, rows, cols));
//
// RETURN_IF_ERROR(expr): expr is an absl::Status; a failure is returned as
// is (the enclosing function returns absl::Status or absl::StatusOr<T>).
// ASSIGN_OR_RETURN(lhs, expr): expr is an absl::StatusOr<T>; its failure is
// returned, else its value is moved into lhs (a declaration or an lvalue).
// Each is one statement; ASSIGN_OR_RETURN declares a hidden local, so it may
// not be the lone body of an unbraced if.
#ifndef SEQBOAT_BASE_STATUS_MACROS_H_
#define SEQBOAT_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RETURN_IF_ERROR(expr)                                         \
  do {                                                                \
    if (::absl::Status seqboat_status_ = (expr); !seqboat_status_.ok()) \
      return seqboat_status_;                                         \
  } while (0)

#define SEQBOAT_STATUS_CONCAT_INNER_(a, b) a##b
#define SEQBOAT_STATUS_CONCAT_(a, b) SEQBOAT_STATUS_CONCAT_INNER_(a, b)

#define ASSIGN_OR_RETURN(lhs, expr)                                         \
  SEQBOAT_ASSIGN_OR_RETURN_IMPL_(                                           \
      SEQBOAT_STATUS_CONCAT_(seqboat_statusor_, __LINE__), lhs, expr)

#define SEQBOAT_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = *std::move(statusor)

#endif  // SEQBOAT_BASE_STATUS_MACROS_H_
