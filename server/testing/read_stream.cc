#include "server/testing/read_stream.h"

namespace seqboat {

StreamRead ReadStream(
    grpc::ClientReaderInterface<v1::GenerateResponse>& reader) {
  StreamRead read;
  v1::GenerateResponse msg;
  while (reader.Read(&msg)) {
    ++read.messages;
    read.ids.insert(read.ids.end(), msg.token_ids().begin(),
                    msg.token_ids().end());
    read.text += msg.text();
    read.last = msg;
  }
  read.status = reader.Finish();
  return read;
}

}  // namespace seqboat
