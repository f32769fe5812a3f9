// Tests of the CLI's apps/skipkv/terminal (compiled into this test): the width of a real pseudo-terminal, the $COLUMNS
// fallback, and FitLine's contract (never wider than asked, items in order,
// the left-out ones counted).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "terminal.h"

namespace skipkv::cli {
namespace {

TEST(TerminalColumns, ReadsThePseudoTerminalsWidth) {
  const int master = posix_openpt(O_RDWR | O_NOCTTY);
  ASSERT_GE(master, 0);
  ASSERT_EQ(grantpt(master), 0);
  ASSERT_EQ(unlockpt(master), 0);
  const int slave = open(ptsname(master), O_RDWR | O_NOCTTY);
  ASSERT_GE(slave, 0);
  winsize ws{};
  ws.ws_col = 37;
  ws.ws_row = 11;
  ASSERT_EQ(ioctl(slave, TIOCSWINSZ, &ws), 0);
  EXPECT_EQ(TerminalColumns(slave), 37);
  close(slave);
  close(master);
}

TEST(TerminalColumns, FallsBackToColumnsThenEighty) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);  // not a terminal
  const char* saved = std::getenv("COLUMNS");
  const std::string keep = saved ? saved : "";
  setenv("COLUMNS", "123", 1);
  EXPECT_EQ(TerminalColumns(fds[1]), 123);
  for (const char* bad : {"0", "-5", "12x", ""}) {
    setenv("COLUMNS", bad, 1);
    EXPECT_EQ(TerminalColumns(fds[1]), 80) << "COLUMNS=" << bad;
  }
  unsetenv("COLUMNS");
  EXPECT_EQ(TerminalColumns(fds[1]), 80);
  if (saved) setenv("COLUMNS", keep.c_str(), 1);
  close(fds[0]);
  close(fds[1]);
}

TEST(FitLine, KeepsWhatFitsInOrderAndCountsTheRest) {
  const std::string head = "eval 3/10 1 s, ETA 2 s";  // 22 bytes
  const std::vector<std::string> items = {" | a 1/2 50%", " | b 0/1 0%", " | c 1/1 100%"};  // 12, 11, 13
  // Everything fits: head and all items, nothing counted.
  EXPECT_EQ(FitLine(head, items, 80), head + items[0] + items[1] + items[2]);
  EXPECT_EQ(FitLine(head, items, 58), head + items[0] + items[1] + items[2]);
  // One byte less: c does not fit; " | +1 more" (10) after a and b needs 55.
  EXPECT_EQ(FitLine(head, items, 57), head + items[0] + items[1] + " | +1 more");
  // a + b + suffix need 55; at 54 only a, then " | +2 more".
  EXPECT_EQ(FitLine(head, items, 54), head + items[0] + " | +2 more");
  EXPECT_EQ(FitLine(head, items, 33), head + " | +3 more");
  EXPECT_EQ(FitLine(head, items, 30), head);  // no room for the count either
  EXPECT_EQ(FitLine(head, items, 10), head.substr(0, 10));
  EXPECT_EQ(FitLine(head, items, 0), head + items[0] + items[1] + items[2]);  // no limit
  EXPECT_EQ(FitLine(head, {}, 5), "eval ");
  for (int w = 1; w < 80; ++w) EXPECT_LE(FitLine(head, items, w).size(), static_cast<size_t>(w)) << w;
}

}  // namespace
}  // namespace skipkv::cli
