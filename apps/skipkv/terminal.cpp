#include "terminal.h"

#include <sys/ioctl.h>

#include <cstdlib>
#include <string>

namespace skipkv::cli {

int TerminalColumns(int fd) {
  winsize ws{};
  if (ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* env = std::getenv("COLUMNS"); env != nullptr) {
    char* end = nullptr;
    const long cols = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && cols > 0 && cols < 100000) return static_cast<int>(cols);
  }
  return 80;
}

std::string FitLine(const std::string& head, const std::vector<std::string>& items, int width) {
  if (width <= 0) {
    std::string line = head;
    for (const std::string& item : items) line += item;
    return line;
  }
  const size_t w = static_cast<size_t>(width);
  if (head.size() >= w) return head.substr(0, w);
  std::string line = head;
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t left = items.size() - i - 1;  // items after this one
    // Room for this item and, if any remain, for the suffix that counts them.
    const size_t suffix = left > 0 ? (" | +" + std::to_string(left) + " more").size() : 0;
    if (line.size() + items[i].size() + suffix <= w) {
      line += items[i];
      continue;
    }
    const std::string more = " | +" + std::to_string(items.size() - i) + " more";
    if (line.size() + more.size() <= w) line += more;
    break;
  }
  return line;
}

}  // namespace skipkv::cli
