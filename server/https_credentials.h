// TLS for the HTTP ports (the OpenAI API, metrics and health): a PEM
// certificate chain and its key, and for mutual TLS a PEM file of the CAs a
// client's certificate must chain to (a client without one, or with one they
// did not sign, fails the handshake). Each new connection is given the
// credentials current when it is accepted, set on its TLS session before the
// handshake; Reload() reads the files again, so connections accepted after it
// get the new ones while those already open keep theirs to the end. Files are
// checked when read (a key that does not match its certificate, a CA file
// without a certificate): a failed Reload() leaves the last ones serving.
#ifndef SEQBOAT_SERVER_HTTPS_CREDENTIALS_H_
#define SEQBOAT_SERVER_HTTPS_CREDENTIALS_H_

#include <microhttpd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace seqboat {

struct TlsFiles {
  std::string cert_file;       // PEM chain, the server's certificate first
  std::string key_file;        // PEM private key of that certificate
  std::string client_ca_file;  // PEM CAs of client certificates; "": none
  bool enabled() const { return !cert_file.empty(); }
  bool mutual() const { return !client_ca_file.empty(); }
};

class HttpsCredentials {
 public:
  // Reads and checks the files. Both a certificate and a key are required.
  static absl::StatusOr<std::unique_ptr<HttpsCredentials>> Open(TlsFiles files);
  ~HttpsCredentials();

  // Reads the files again for connections accepted from now on; on an error
  // (naming the file) the current credentials stay.
  absl::Status Reload();
  const TlsFiles& files() const { return files_; }

  // What a libmicrohttpd daemon serving over TLS is started with: this flag
  // or'ed into its flags, and these options through MHD_OPTION_ARRAY (they
  // point into this object, which must outlive the daemon). With `tls` null,
  // no flag and an empty array: plain HTTP.
  static unsigned int DaemonFlags(const HttpsCredentials* tls);
  static std::vector<MHD_OptionItem> DaemonOptions(HttpsCredentials* tls);

  struct Generation;  // one reading of the files

 private:
  explicit HttpsCredentials(TlsFiles files) : files_(std::move(files)) {}
  static void OnConnection(void* cls, MHD_Connection* connection,
                           void** socket_context,
                           MHD_ConnectionNotificationCode code);

  const TlsFiles files_;
  // The first reading's PEM text, which MHD wants at start (and checks);
  // every connection's session is then given the current generation.
  std::string first_cert_pem_;
  std::string first_key_pem_;
  absl::Mutex mu_;
  std::shared_ptr<const Generation> current_ ABSL_GUARDED_BY(mu_);
};

// The text of a PEM file, or an error naming it (missing, empty, not PEM).
absl::StatusOr<std::string> ReadPemFile(const std::string& path,
                                        const char* what);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_HTTPS_CREDENTIALS_H_
