// A Generate stream read to its end, as a client sees it, for tests that
// check what arrived rather than how it was split into messages.
#ifndef SEQBOAT_SERVER_TESTING_READ_STREAM_H_
#define SEQBOAT_SERVER_TESTING_READ_STREAM_H_

#include <grpcpp/support/status.h>
#include <grpcpp/support/sync_stream.h>

#include <cstdint>
#include <string>
#include <vector>

#include "seqboat/v1/generate.pb.h"

namespace seqboat {

struct StreamRead {
  std::vector<int32_t> ids;  // every message's token ids, in order
  std::string text;          // every message's text, in order
  int messages = 0;
  v1::GenerateResponse last;  // the last message
  grpc::Status status;        // Finish()'s
};

StreamRead ReadStream(
    grpc::ClientReaderInterface<v1::GenerateResponse>& reader);

}  // namespace seqboat

#endif  // SEQBOAT_SERVER_TESTING_READ_STREAM_H_
