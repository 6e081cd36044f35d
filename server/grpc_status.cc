#include "server/grpc_status.h"

#include <string>

namespace seqboat {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  int code = static_cast<int>(status.code());
  // Codes gRPC does not know (absl reserves room for more) become UNKNOWN
  // rather than an out-of-range enum value on the wire.
  if (code < grpc::StatusCode::OK || code > grpc::StatusCode::UNAUTHENTICATED) {
    code = grpc::StatusCode::UNKNOWN;
  }
  return grpc::Status(static_cast<grpc::StatusCode>(code),
                      std::string(status.message()));
}

}  // namespace seqboat
