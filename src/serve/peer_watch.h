// Noticing that an HTTP client went away while its non-streaming request is
// still generating. cpp-httplib (Debian's 0.11) gives a handler no socket and
// no "is the connection closed" call, only the connection's two addresses, so
// the socket is found by those (the connection's fd stays open, and so
// cannot be reused, until the handler returns) and then polled.
#pragma once

#include <string>

namespace skipkv::serve {

// The fd of this process's connected TCP socket whose local end is
// local_addr:local_port and whose peer is remote_addr:remote_port (numeric
// addresses as getnameinfo(NI_NUMERICHOST) writes them, as httplib does), or
// -1 when none matches.
int FindConnectionSocket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                         int remote_port);

// True when the peer of connected socket `fd` has closed (or reset) its end:
// poll reports hang-up, read hang-up or an error, or data is readable and a
// peek reads 0 bytes (EOF). Bytes the client already sent (a pipelined next
// request) are left unread and do not count as a close. Never blocks. A
// client that only shuts down its sending side counts as gone.
bool PeerClosed(int fd);

}  // namespace skipkv::serve
