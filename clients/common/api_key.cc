#include "clients/common/api_key.h"

#include <grpcpp/support/client_interceptor.h>

#include <cstdlib>
#include <utility>
#include <vector>

namespace seqboat {
namespace {

class ApiKeyInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ApiKeyInterceptor(const std::string* value) : value_(value) {}

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            grpc::experimental::InterceptionHookPoints::
                PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", *value_});
    }
    methods->Proceed();
  }

 private:
  const std::string* value_;  // the factory's, which outlives its channel
};

class ApiKeyInterceptorFactory final
    : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ApiKeyInterceptorFactory(std::string value)
      : value_(std::move(value)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new ApiKeyInterceptor(&value_);
  }

 private:
  const std::string value_;
};

}  // namespace

std::string ApiKeyFrom(const std::string& flag) {
  if (!flag.empty()) return flag;
  const char* env = std::getenv("SEQBOAT_API_KEY");
  return env != nullptr ? env : "";
}

std::shared_ptr<grpc::Channel> CreateChannelWithApiKey(
    const std::string& target,
    const std::shared_ptr<grpc::ChannelCredentials>& credentials,
    const grpc::ChannelArguments& args, const std::string& api_key) {
  if (api_key.empty()) {
    return grpc::CreateCustomChannel(target, credentials, args);
  }
  std::vector<
      std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>>
      factories;
  factories.push_back(
      std::make_unique<ApiKeyInterceptorFactory>("Bearer " + api_key));
  return grpc::experimental::CreateCustomChannelWithInterceptors(
      target, credentials, args, std::move(factories));
}

}  // namespace seqboat
