// A GenerateRequest from raw bytes, as the gRPC service receives it: parsed,
// then validated by RequestFromProto against a real tokenizer. Either the
// request is refused (INVALID_ARGUMENT naming a field; INTERNAL only for a
// tokenizer id past the model's rows), or every field of the engine Request
// is inside the bounds generate.proto promises.
#include <cstdint>

#include "fuzz/request_checks.h"
#include "google/protobuf/stubs/logging.h"
#include "seqboat/v1/generate.pb.h"
#include "server/request_validation.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // Refused UTF-8 is logged by protobuf on every such input; the fuzzer
  // produces thousands a second.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  seqboat::v1::GenerateRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  seqboat::fuzz::CheckValidated(
      proto, seqboat::RequestFromProto(
                 proto, seqboat::fuzz::RequestVocabulary(),
                 seqboat::fuzz::RequestLimits(), seqboat::fuzz::Fallbacks()));
  return 0;
}
