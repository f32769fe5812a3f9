// Fitting progress lines to the terminal. A line that is redrawn in place
// with "\r" must not be wider than the terminal: it would wrap, and the
// carriage return goes back only to the start of its last row, so every
// redraw would leave the rows above behind and scroll.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace skipkv::cli {

// Columns of the terminal on `fd` (TIOCGWINSZ); where that fails (not a
// terminal, or a size of 0): $COLUMNS when it is a positive integer, else 80.
int TerminalColumns(int fd);

// `head`, then as many of `items` as fit, in order, within `width` bytes
// (the callers write ASCII). Items that do not fit are counted in a suffix
// " | +N more" (itself kept within `width` when possible); a head wider than
// `width` is cut to it. width <= 0 means no limit.
std::string FitLine(const std::string& head, const std::vector<std::string>& items, int width);

}  // namespace skipkv::cli
