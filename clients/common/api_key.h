// A client's API key: from its flag, else the SEQBOAT_API_KEY environment
// variable, and channels that send it as `authorization: Bearer KEY` metadata
// on every call (an interceptor, since gRPC sends call credentials only over
// TLS and a key may go to a server on loopback or behind a TLS proxy).
#ifndef SEQBOAT_CLIENTS_COMMON_API_KEY_H_
#define SEQBOAT_CLIENTS_COMMON_API_KEY_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

namespace seqboat {

// `flag` if set, else $SEQBOAT_API_KEY, else "" (send no key).
std::string ApiKeyFrom(const std::string& flag);

// grpc::CreateCustomChannel, adding the key's metadata to every call when
// `api_key` is not empty.
std::shared_ptr<grpc::Channel> CreateChannelWithApiKey(
    const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& api_key);

}  // namespace seqboat

#endif  // SEQBOAT_CLIENTS_COMMON_API_KEY_H_
