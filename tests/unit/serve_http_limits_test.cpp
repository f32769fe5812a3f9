// serve/http_limits (issue 43) on a bare httplib::Server over loopback:
// handlers run on threads with the configured stack size (not ulimit -s),
// and a handler that throws -- a std::exception or anything else -- answers
// 500 in OpenAI's error shape while the next request is served.
#include <gtest/gtest.h>
#include <httplib.h>

#include <string>
#include <thread>

#include "serve/http_limits.h"

namespace skipkv::serve {
namespace {

TEST(ServeHttpLimits, StackSizeAndThrowingHandlersFailAlone) {
  HttpLimits limits;
  limits.threads = 4;
  limits.thread_stack_bytes = 3u << 20;  // unlike any default (8 MiB ulimit, glibc's 2 MiB fallback)
  httplib::Server http;
  ApplyHttpLimits(limits, http);
  http.Get("/stack", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(std::to_string(CurrentThreadStackBytes()), "text/plain");
  });
  http.Get("/throw",
           [](const httplib::Request&, httplib::Response&) { throw std::runtime_error("planted"); });
  http.Get("/throw-int", [](const httplib::Request&, httplib::Response&) { throw 42; });
  const int port = http.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread listener([&] { http.listen_after_bind(); });
  httplib::Client cli("127.0.0.1", port);
  cli.set_read_timeout(10, 0);
  for (int i = 0; i < 3; ++i) {
    auto r = cli.Get("/throw");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500);
    EXPECT_NE(r->body.find("\"type\":\"server_error\""), std::string::npos) << r->body;
    EXPECT_NE(r->body.find("planted"), std::string::npos) << r->body;
    r = cli.Get("/throw-int");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 500) << r->body;
    r = cli.Get("/stack");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, std::to_string(3u << 20));
  }
  // Too many header fields: 431 before any handler.
  httplib::Headers many;
  for (int i = 0; i < 200; ++i) many.emplace("X-H" + std::to_string(i), "v");
  auto r = cli.Get("/stack", many);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 431);
  http.stop();
  listener.join();
}

}  // namespace
}  // namespace skipkv::serve
