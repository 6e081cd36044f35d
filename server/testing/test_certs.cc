#include "server/testing/test_certs.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace seqboat {
namespace {

constexpr char kNewKey[] =
    "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2";

absl::Status Run(const std::string& command, const std::string& log) {
  const std::string line = absl::StrCat(command, " >>", log, " 2>&1");
  if (std::system(line.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("failed (see ", log, "): ", line));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CertFiles> MakeTestCa(const std::string& dir,
                                     const std::string& name) {
  const std::string base = absl::StrCat(dir, "/", name);
  CertFiles ca{base + ".crt", base + ".key"};
  absl::Status made = Run(
      absl::StrCat("openssl req -x509 ", kNewKey, " -subj /CN=", name,
                   " -addext basicConstraints=critical,CA:TRUE"
                   " -addext keyUsage=critical,keyCertSign,cRLSign -keyout ",
                   ca.key, " -out ", ca.cert),
      dir + "/openssl.log");
  if (!made.ok()) return made;
  return ca;
}

absl::StatusOr<CertFiles> MakeTestCert(const std::string& dir,
                                       const std::string& name,
                                       const CertFiles& ca, bool server,
                                       const std::string& server_name) {
  const std::string base = absl::StrCat(dir, "/", name);
  CertFiles files{base + ".crt", base + ".key"};
  std::ofstream(base + ".ext")
      << (!server ? "extendedKeyUsage=clientAuth\n"
          : server_name.empty()
              ? "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                "extendedKeyUsage=serverAuth\n"
              : absl::StrCat("subjectAltName=DNS:", server_name,
                             "\nextendedKeyUsage=serverAuth\n"));
  const std::string log = dir + "/openssl.log";
  absl::Status made =
      Run(absl::StrCat("openssl req ", kNewKey, " -subj /CN=", name,
                       " -keyout ", files.key, " -out ", base, ".csr"),
          log);
  if (!made.ok()) return made;
  made = Run(
      absl::StrCat("openssl x509 -req -days 2 -in ", base, ".csr -CA ", ca.cert,
                   " -CAkey ", ca.key, " -CAcreateserial -extfile ", base,
                   ".ext -out ", files.cert),
      log);
  if (!made.ok()) return made;
  return files;
}

}  // namespace seqboat
