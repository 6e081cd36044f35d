#include "server/mhd_response.h"

namespace seqboat {

MHD_Result Respond(MHD_Connection* connection, unsigned status,
                   const std::string& body, const char* content_type,
                   const Headers& headers) {
  MHD_Response* response = MHD_create_response_from_buffer(
      body.size(), const_cast<char*>(body.data()), MHD_RESPMEM_MUST_COPY);
  if (response == nullptr) return MHD_NO;
  MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
  for (const auto& [name, value] : headers) {
    if (name != nullptr) MHD_add_response_header(response, name, value.c_str());
  }
  const MHD_Result queued = MHD_queue_response(connection, status, response);
  MHD_destroy_response(response);
  return queued;
}

MHD_Result RespondError(MHD_Connection* connection, const OpenAiError& error,
                        const Headers& headers) {
  return Respond(connection, static_cast<unsigned>(error.http_status),
                 ErrorBody(error), kJson, headers);
}

}  // namespace seqboat
