#include "server/http_endpoint.h"

#include <httplib.h>

#include <atomic>
#include <memory>
#include <string>

#include "gtest/gtest.h"

namespace seqboat {
namespace {

TEST(HttpEndpointTest, ServesMetricsHealthAndReadiness) {
  std::atomic<bool> ready{false};
  HttpEndpoint::Handlers handlers;
  handlers.metrics = [] { return std::string("m_total 1\n"); };
  handlers.ready = [&ready] { return ready.load(); };
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, handlers);
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  ASSERT_GT((*endpoint)->port(), 0);

  httplib::Client client("127.0.0.1", (*endpoint)->port());
  client.set_connection_timeout(5);
  client.set_read_timeout(5);
  auto metrics = client.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200);
  EXPECT_EQ(metrics->body, "m_total 1\n");
  EXPECT_EQ(metrics->get_header_value("Content-Type"),
            "text/plain; version=0.0.4; charset=utf-8");

  auto health = client.Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);

  auto not_ready = client.Get("/readyz");
  ASSERT_TRUE(not_ready);
  EXPECT_EQ(not_ready->status, 503);
  ready = true;
  auto is_ready = client.Get("/readyz");
  ASSERT_TRUE(is_ready);
  EXPECT_EQ(is_ready->status, 200);

  auto missing = client.Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
}

TEST(HttpEndpointTest, BusyPortIsAnErrorNotACrash) {
  HttpEndpoint::Handlers handlers;
  handlers.metrics = [] { return std::string(); };
  handlers.ready = [] { return true; };
  auto first = HttpEndpoint::Start("127.0.0.1", 0, handlers);
  ASSERT_TRUE(first.ok());
  auto second = HttpEndpoint::Start("127.0.0.1", (*first)->port(), handlers);
  EXPECT_FALSE(second.ok());
}

TEST(HttpEndpointTest, MissingHandlerIsRejected) {
  EXPECT_FALSE(HttpEndpoint::Start("127.0.0.1", 0, {}).ok());
}

}  // namespace
}  // namespace seqboat
