// The HTTP layer's limits against hostile clients (issue 43), in one place:
// worker threads with an explicit stack size, body / header limits, socket
// timeouts, and an exception handler, so that whatever one request sends or
// triggers fails that request alone. Applied to the server by Server::Impl and
// to a bare httplib::Server by tests.
#pragma once

#include <cstddef>
#include <ctime>

namespace httplib {
class Server;
}

namespace skipkv::serve {

struct HttpLimits {
  int threads = 64;                                // handler threads (a stream holds one); at least 4
  size_t thread_stack_bytes = 8u << 20;            // each handler thread's stack (pthread attribute)
  size_t max_body_bytes = 8u << 20;                // larger bodies: 413; chunked bodies: 411
  size_t max_header_count = 128;                   // more header fields: 431
  time_t read_timeout_s = 5, write_timeout_s = 5;  // per recv / send: a stalled client is dropped
  time_t keep_alive_timeout_s = 5;                 // idle keep-alive connections are closed after this
  size_t keep_alive_max_count = 100;               // requests per connection
};

// Installs the limits, the thread pool and a 500 exception handler (OpenAI
// error shape) on `http`. Call before binding. Handlers that throw answer 500
// and the server goes on.
void ApplyHttpLimits(const HttpLimits& limits, httplib::Server& http);

// The stack size of the calling thread (pthread_getattr_np), 0 if unknown:
// lets tests check that handlers run on the configured stacks.
size_t CurrentThreadStackBytes();

}  // namespace skipkv::serve
