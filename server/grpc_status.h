// Conversion of module-boundary absl::Status values to gRPC statuses at the
// edge of the server.
#ifndef SEQBOAT_SERVER_GRPC_STATUS_H_
#define SEQBOAT_SERVER_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace seqboat {

// Same code (the two enums share their numbering) and message.
grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_GRPC_STATUS_H_
