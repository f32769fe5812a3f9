// End-to-end, issue 43: `skipkv serve` (embedded stories260K, loopback port)
// against a hostile client over raw sockets. Each case asserts its status
// code and then that a normal chat request still completes (200): deeply
// nested JSON (2e5 and 1e6 levels, also inside kv, stop and content), a huge
// header, too many headers, a chunked body that stalls and one that never
// ends, a body over the limit, garbage, and a streaming client that never
// reads. Loops and waits are bounded; only 127.0.0.1 is used. The same depth
// in a dataset line, a grade file and a tokenizer.json is a FILE:LINE error
// with exit code 1.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {

const std::string kBinary = std::string(SKIPKV_BINARY_DIR) + "/apps/skipkv/skipkv";

// `skipkv serve --port 0 ARGS` as a child; the port from its "listening on" line.
class Server {
 public:
  explicit Server(const std::string& args) {
    int fds[2];
    if (::pipe(fds) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      ::close(fds[0]);
      ::close(fds[1]);
      const std::string cmd = "exec " + kBinary + " serve --port 0 -t 1 " + args + " 2>/dev/null";
      ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline && port_ == 0) {
      pollfd p{fds[0], POLLIN, 0};
      if (::poll(&p, 1, 200) <= 0) continue;
      char c;
      if (::read(fds[0], &c, 1) != 1) break;
      if (c != '\n') {
        line += c;
      } else if (line.find("listening on http://") != std::string::npos) {
        port_ = std::stoi(line.substr(line.rfind(':') + 1));
      } else {
        line.clear();
      }
    }
    out_fd_ = fds[0];
  }
  ~Server() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
  }
  int port() const { return port_; }
  // Whether the process is still running (not crashed).
  bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int port_ = 0;
};

// A loopback TCP connection with send/receive timeouts.
int Connect(int port, int timeout_s = 30) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{timeout_s, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Sends all of `data`; false when the peer stopped taking it (closed, reset, timeout).
bool SendAll(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

// Reads until the peer closes or the timeout; the bytes read.
std::string ReadAll(int fd) {
  std::string out;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  return out;
}

// The status code of a raw HTTP/1.1 response (0 when none came).
int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.c_str() + 9);
}

// One request on a fresh connection ("Connection: close"); the raw response.
std::string Exchange(int port, const std::string& request) {
  const int fd = Connect(port);
  if (fd < 0) return "";
  SendAll(fd, request);
  std::string r = ReadAll(fd);
  ::close(fd);
  return r;
}

std::string Post(const std::string& path, const std::string& body, const std::string& extra_headers = "") {
  return "POST " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\n" +
         extra_headers + "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

const std::string kChat = "/v1/chat/completions";
const std::string kHi = R"({"role":"user","content":"hi"})";

// A normal chat request completes.
void ExpectServing(const Server& s, const std::string& after) {
  const std::string r = Exchange(s.port(), Post(kChat, R"({"messages":[)" + kHi + R"(],"max_tokens":3})"));
  EXPECT_EQ(StatusOf(r), 200) << "after " << after << ": " << r.substr(0, 300);
  EXPECT_NE(r.find("\"chat.completion\""), std::string::npos) << after;
  EXPECT_TRUE(s.alive()) << after;
}

std::string Deep(size_t levels) { return std::string(levels, '[') + std::string(levels, ']'); }

TEST(ServeHostileE2ETest, DeeplyNestedJsonIs400AndTheServerGoesOn) {
  Server s("");
  ASSERT_GT(s.port(), 0);
  for (size_t levels : {200000u, 1000000u}) {
    const std::string d = Deep(levels);
    const std::pair<std::string, std::string> cases[] = {
        {R"({"messages":)" + d + "}", "messages"},
        {R"({"messages":[{"role":"user","content":)" + d + "}]}", "messages"},
        {R"({"messages":[)" + kHi + R"(],"kv":{"policy":"rkv","budget":)" + d + "}}", "kv"},
        {R"({"messages":[)" + kHi + R"(],"stop":)" + d + "}", "stop"}};
    for (const auto& [body, param] : cases) {
      const std::string what = std::to_string(levels) + " levels in " + param;
      const std::string r = Exchange(s.port(), Post(kChat, body));
      EXPECT_EQ(StatusOf(r), 400) << what << ": " << r.substr(0, 300);
      EXPECT_NE(r.find("\"param\":\"" + param + "\""), std::string::npos) << what << ": " << r.substr(0, 300);
      EXPECT_NE(r.find("deeper than 512 levels"), std::string::npos) << what;
      ExpectServing(s, what);
    }
  }
}

TEST(ServeHostileE2ETest, HostileHttpGetsItsStatusAndTheServerGoesOn) {
  Server s("");
  ASSERT_GT(s.port(), 0);
  const std::string get = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n";
  // A 100 KB header line (the library's limit is 8 KiB a line).
  EXPECT_EQ(StatusOf(Exchange(s.port(), get + "X-Big: " + std::string(100000, 'a') + "\r\n\r\n")), 400);
  ExpectServing(s, "a huge header");
  // 1,000 header fields (limit 128).
  std::string many = get;
  for (int i = 0; i < 1000; ++i) many += "X-H" + std::to_string(i) + ": v\r\n";
  const std::string r431 = Exchange(s.port(), many + "\r\n");
  EXPECT_EQ(StatusOf(r431), 431) << r431.substr(0, 300);
  ExpectServing(s, "many headers");
  // A body over the 8 MiB limit, by Content-Length.
  EXPECT_EQ(StatusOf(Exchange(s.port(), Post(kChat, std::string(9u << 20, ' ')))), 413);
  ExpectServing(s, "a 9 MiB body");
  // Garbage instead of a request line.
  EXPECT_EQ(StatusOf(Exchange(s.port(), "\x01\x02 garbage\r\n\r\n")), 400);
  ExpectServing(s, "garbage");
  // Chunked bodies (cpp-httplib would read them whole, past the body limit):
  // 411 before a byte of the body is read, whether it stalls or never ends.
  const std::string chunked_head = "POST " + kChat +
                                   " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                                   "Transfer-Encoding: chunked\r\n\r\n";
  {
    const int fd = Connect(s.port(), 20);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, chunked_head + "5\r\n{\"a\":\r\n"));  // then nothing more
    ExpectServing(s, "a stalled chunked body (while it stalls)");
    const std::string r = ReadAll(fd);
    EXPECT_EQ(StatusOf(r), 411) << r.substr(0, 200);
    ::close(fd);
    ExpectServing(s, "a stalled chunked body");
  }
  {
    const int fd = Connect(s.port(), 10);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(SendAll(fd, chunked_head));
    const std::string chunk = "10000\r\n" + std::string(0x10000, ' ') + "\r\n";
    size_t sent = 0;  // at most 64 MiB
    while (sent < (64u << 20) && SendAll(fd, chunk)) sent += 0x10000;
    EXPECT_LT(sent, 64u << 20) << "the server read an endless chunked body";
    ::close(fd);
    ExpectServing(s, "an endless chunked body");
  }
}

TEST(ServeHostileE2ETest, StreamingClientThatNeverReadsDoesNotStopOthers) {
  Server s("");
  ASSERT_GT(s.port(), 0);
  // Four streams whose clients never read a byte, held open meanwhile.
  int fds[4];
  for (int& fd : fds) {
    fd = Connect(s.port());
    ASSERT_GE(fd, 0);
    const int rcv = 1024;  // a small receive window, so the server's writes block sooner
    ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
    ASSERT_TRUE(SendAll(fd, Post(kChat, R"({"messages":[)" + kHi + R"(],"stream":true,"max_tokens":400})")));
  }
  for (int i = 0; i < 3; ++i) ExpectServing(s, "streams that are never read, round " + std::to_string(i));
  for (int fd : fds) ::close(fd);
  ExpectServing(s, "closing the unread streams");
}

// Runs `skipkv ARGS` with stderr captured; {exit code (-1 on a signal), output}.
std::pair<int, std::string> Skipkv(const std::string& args) {
  std::string out;
  FILE* p = ::popen(("exec " + kBinary + " " + args + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

TEST(ServeHostileE2ETest, DeepJsonInFilesIsANamedErrorWithExitCode1) {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("skipkv_deep_files_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string d = Deep(200000), data = (dir / "data.jsonl").string(),
                    grade = (dir / "grade.jsonl").string(), tok = (dir / "tokenizer.json").string();
  std::ofstream(data) << "{\"question\": \"1+1?\", \"answer\": \"2\"}\n{\"question\": " << d
                      << ", \"answer\": \"2\"}\n";
  std::ofstream(grade) << "{\"prediction\": \"2\", \"reference\": \"2\"}\n{\"prediction\": " << d
                       << ", \"reference\": \"2\"}\n";
  std::ofstream(tok) << "{\n\"model\": {\"type\": \"BPE\", \"vocab\": " << d << "}}";
  const std::pair<std::string, std::string> cases[] = {
      {"eval --dataset " + data + " --methods fullkv --max-gen 4 -o " + (dir / "rows.jsonl").string(),
       data + ":2: JSON nested deeper than 512 levels (in 'question'"},
      {"eval grade " + grade, grade + ":2: JSON nested deeper than 512 levels (in 'prediction'"},
      {"tokenize --tokenizer-json " + tok + " hi",
       tok + ":2: JSON nested deeper than 512 levels (in 'model'"}};
  for (const auto& [args, message] : cases) {
    const auto [rc, out] = Skipkv(args);
    EXPECT_EQ(rc, 1) << args << ": " << out.substr(0, 300);
    EXPECT_NE(out.find(message), std::string::npos) << args << ": " << out.substr(0, 300);
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "rows.jsonl"));
  std::filesystem::remove_all(dir);
}

}  // namespace
