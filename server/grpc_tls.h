// The gRPC port's server credentials: plaintext without a certificate, else
// TLS from the same PEM files as the HTTP ports (checked first, so a bad file
// stops the start naming it), requiring and verifying a client certificate
// when a client CA file is given. gRPC's file watcher reads the files again
// every `refresh_seconds`: new handshakes get the new certificate, streams
// already open go on. gRPC 1.51 offers no way to ask it to read them now, so
// SIGHUP does not reach this port; the files should be replaced key and
// certificate at once (a renamed folder or symlink, as a Kubernetes secret's
// mount is), or a refresh may read a key of one and a certificate of the
// other and fail handshakes until the next.
#ifndef SEQBOAT_SERVER_GRPC_TLS_H_
#define SEQBOAT_SERVER_GRPC_TLS_H_

#include <grpcpp/security/server_credentials.h>

#include <memory>

#include "absl/status/statusor.h"
#include "server/https_credentials.h"

namespace seqboat {

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(
    const TlsFiles& files, int refresh_seconds);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_GRPC_TLS_H_
