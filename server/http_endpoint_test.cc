#include "server/http_endpoint.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

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

HttpEndpoint::Handlers Trivial() {
  HttpEndpoint::Handlers handlers;
  handlers.metrics = [] { return std::string("m 1\n"); };
  handlers.ready = [] { return true; };
  return handlers;
}

// A connected TCP socket whose reads give up after 5 s.
int Connect(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  return fd;
}

void Send(int fd, const std::string& bytes) {
  // The server may close early (that is the point of some tests): no
  // SIGPIPE, and a short send is fine.
  send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

// The status line of the reply, or "" when none came.
std::string StatusLine(int fd) {
  std::string got;
  char c;
  while (got.size() < 200 && recv(fd, &c, 1, 0) == 1 && c != '\r') {
    got.push_back(c);
  }
  return got;
}

// The side port used to serve from two threads that idle connections held
// (three delayed /healthz by 9.7 s, and a liveness probe would restart the
// replica): 200 half-sent requests must not keep a probe waiting.
TEST(HttpEndpointTest, ProbesAnswerWhileManyConnectionsIdle) {
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, Trivial());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  std::vector<int> idle;
  for (int i = 0; i < 200; ++i) {
    idle.push_back(Connect((*endpoint)->port()));
    Send(idle.back(), "GET /healthz HTTP/1.1\r\nHost: x\r\n");
  }
  httplib::Client client("127.0.0.1", (*endpoint)->port());
  client.set_connection_timeout(2);
  client.set_read_timeout(2);
  for (int i = 0; i < 5; ++i) {
    auto health = client.Get("/healthz");
    ASSERT_TRUE(health) << "probe " << i << " not answered";
    EXPECT_EQ(health->status, 200);
  }
  // The half-sent requests are still pending, not dropped to make room: one
  // of them completes normally.
  Send(idle[0], "\r\n");
  EXPECT_EQ(StatusLine(idle[0]), "HTTP/1.1 200 OK");
  for (int fd : idle) close(fd);
}

// 10,000 headers were answered 200: the request line and headers are bounded.
TEST(HttpEndpointTest, TooManyHeadersAreRefused) {
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, Trivial());
  ASSERT_TRUE(endpoint.ok());
  const int fd = Connect((*endpoint)->port());
  std::string request = "GET /healthz HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 10000; ++i) request += "X-Filler: abcdefgh\r\n";
  request += "\r\n";
  Send(fd, request);
  const std::string status = StatusLine(fd);
  EXPECT_NE(status, "HTTP/1.1 200 OK");
  EXPECT_TRUE(status.empty() || status.find(" 431 ") != std::string::npos)
      << status;
  close(fd);
}

// A 10 MiB body was read whole before the 404: a body is refused unread.
TEST(HttpEndpointTest, BodiesAreRefusedUnread) {
  auto endpoint = HttpEndpoint::Start("127.0.0.1", 0, Trivial());
  ASSERT_TRUE(endpoint.ok());
  const int fd = Connect((*endpoint)->port());
  // The headers announce 10 MiB; none of it is sent, yet the answer comes.
  Send(fd,
       "POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 10485760\r\n"
       "\r\n");
  EXPECT_EQ(StatusLine(fd), "HTTP/1.1 405 Method Not Allowed");
  close(fd);
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
