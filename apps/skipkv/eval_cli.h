// Shared by the eval-family commands (eval, eval fidelity, demo, bench
// throughput): the sweep's progress line (done/total, ETA, running accuracy
// per (method, budget)) and comma-separated list options.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "eval/sweep.h"
#include "terminal.h"

namespace skipkv::cli {

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
inline std::vector<std::string> SplitComma(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// "--budgets 512,1024" -> {512, 1024}; InvalidArgument naming the item that is
// not an integer.
inline StatusOr<std::vector<int64_t>> ParseBudgetList(const std::string& s) {
  std::vector<int64_t> budgets;
  for (const auto& b : SplitComma(s)) {
    try {
      size_t used = 0;
      budgets.push_back(std::stoll(b, &used));
      if (used != b.size()) throw std::invalid_argument(b);
    } catch (...) {
      return InvalidArgument("--budgets: '" + b + "' is not an integer");
    }
  }
  return budgets;
}

// A progress line on stderr: redrawn in place on a terminal (at most 4 times
// a second, cut to the terminal's width with the per-method figures that do
// not fit counted), otherwise a line per 5% or 30 s, in full.
class SweepBar {
 public:
  explicit SweepBar(bool quiet) : quiet_(quiet), tty_(isatty(fileno(stderr)) != 0) {}
  void Update(const eval::SweepProgress& p) {
    if (quiet_) return;
    const double frac = p.total > 0 ? static_cast<double>(p.done) / static_cast<double>(p.total) : 1.0;
    const bool final = p.done == p.total;
    if (!final) {
      if (tty_ && p.elapsed_s - last_s_ < 0.25 && p.done > 0) return;
      if (!tty_ && frac - last_frac_ < 0.05 && p.elapsed_s - last_s_ < 30 && p.done > 0) return;
    }
    last_s_ = p.elapsed_s;
    last_frac_ = frac;
    char eta[48] = "ETA --";
    if (p.done > 0 && !final) std::snprintf(eta, sizeof eta, "ETA %.0f s", p.elapsed_s * (1 - frac) / frac);
    if (final) std::snprintf(eta, sizeof eta, "done");
    std::vector<std::string> acc;
    for (const auto& [label, v] : p.accuracy) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " | %s %lld/%lld %.0f%%", label.c_str(), static_cast<long long>(v.first),
                    static_cast<long long>(v.second), v.second ? 100.0 * v.first / v.second : 0.0);
      acc.emplace_back(buf);
    }
    char head[160];
    std::snprintf(head, sizeof head, "eval %lld/%lld (%lld resumed) %.0f s, %s", static_cast<long long>(p.done),
                  static_cast<long long>(p.total), static_cast<long long>(p.resumed), p.elapsed_s, eta);
    // Redrawn in place: within the terminal's width (the last column left
    // free), the per-method figures that do not fit counted instead.
    const bool redraw = tty_ && !final;
    const std::string line = FitLine(head, acc, redraw ? TerminalColumns(fileno(stderr)) - 1 : 0);
    std::fprintf(stderr, "%s%s%s", tty_ ? "\r\033[K" : "", line.c_str(), redraw ? "" : "\n");
    std::fflush(stderr);
  }

 private:
  bool quiet_, tty_;
  double last_s_ = -1, last_frac_ = -1;
};

}  // namespace skipkv::cli
