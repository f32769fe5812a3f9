// A one-line progress bar on stderr with elapsed time and ETA, for long CLI
// work (make-model, convert). On a terminal it redraws in place, within the
// terminal's width (a wrapped line cannot be redrawn), at most ten
// times a second; when stderr is a file or pipe it prints a line per 10% so
// logs stay short. Units are whatever the caller counts (elements, tensors).
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>

#include "terminal.h"

namespace skipkv::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label)
      : label_(std::move(label)), start_(Clock::now()), tty_(isatty(fileno(stderr)) != 0) {}

  // done <= total; detail is shown after the figures (e.g. the current tensor).
  void Update(double done, double total, const std::string& detail) {
    const double frac = total > 0 ? std::min(1.0, done / total) : 1.0;
    const double elapsed = Seconds();
    if (tty_) {
      if (frac < 1.0 && elapsed - last_draw_ < 0.1) return;
    } else {
      const int decile = static_cast<int>(frac * 10);
      if (decile == last_decile_ && frac < 1.0) return;
      last_decile_ = decile;
    }
    last_draw_ = elapsed;
    constexpr int kWidth = 30;
    char bar[kWidth + 1];
    const int filled = static_cast<int>(frac * kWidth);
    for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
    bar[kWidth] = '\0';
    char eta[32] = "ETA --";
    if (frac > 0.0 && frac < 1.0) std::snprintf(eta, sizeof eta, "ETA %.0f s", elapsed * (1.0 - frac) / frac);
    if (frac >= 1.0) std::snprintf(eta, sizeof eta, "done");
    char line[512];
    std::snprintf(line, sizeof line, "%s [%s] %3.0f%% %.0f s, %s  %.32s", label_.c_str(), bar, 100.0 * frac,
                  elapsed, eta, detail.c_str());
    // Within the terminal's width (the last column left free): a wrapped
    // line would not be redrawn in place.
    const std::string shown = FitLine(line, {}, tty_ ? TerminalColumns(fileno(stderr)) - 1 : 0);
    std::fprintf(stderr, "%s%s%s", tty_ ? "\r\033[K" : "", shown.c_str(), tty_ ? "" : "\n");
    if (tty_ && frac >= 1.0) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  double Seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

  std::string label_;
  Clock::time_point start_;
  bool tty_;
  double last_draw_ = -1.0;
  int last_decile_ = -1;
};

}  // namespace skipkv::cli
