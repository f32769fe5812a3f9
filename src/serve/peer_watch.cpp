// Finding a connection's socket by its addresses and polling it for a
// closed peer; see peer_watch.h.
#include "serve/peer_watch.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace skipkv::serve {
namespace {

// The numeric host and port of a socket address; false for non-IP families.
bool HostPort(const sockaddr_storage& a, socklen_t len, std::string* host, int* port) {
  if (a.ss_family != AF_INET && a.ss_family != AF_INET6) return false;
  char h[NI_MAXHOST], p[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, h, sizeof h, p, sizeof p,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return false;
  }
  *host = h;
  *port = std::atoi(p);
  return true;
}

}  // namespace

int FindConnectionSocket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                         int remote_port) {
  if (local_port <= 0 || remote_port <= 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == dirfd(dir)) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    std::string host;
    int port = 0;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        !HostPort(a, len, &host, &port) || port != local_port || host != local_addr) {
      continue;
    }
    len = sizeof a;
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&a), &len) != 0 ||
        !HostPort(a, len, &host, &port) || port != remote_port || host != remote_addr) {
      continue;
    }
    found = static_cast<int>(fd);
    break;
  }
  closedir(dir);
  return found;
}

bool PeerClosed(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {
    char c;
    return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

}  // namespace skipkv::serve
