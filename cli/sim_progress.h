#pragma once
// Progress of a long simulation on stderr (SimOptions::on_progress). Quiet for the first second
// (most simulations end before); then, on a terminal, one line rewritten in place and erased
// when the simulation ends; elsewhere (a log file, a pipe) a plain line every 10 s.
#include <fmt/core.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <string_view>

namespace parlab::cli {

class SimProgressLine {
 public:
  explicit SimProgressLine(std::string label)
      : label_(std::move(label)), tty_(::isatty(::fileno(stderr)) == 1), start_(std::chrono::steady_clock::now()) {}
  SimProgressLine(const SimProgressLine&) = delete;
  SimProgressLine& operator=(const SimProgressLine&) = delete;
  ~SimProgressLine() { done(); }

  // Erases the line (terminal); call before printing results.
  void done() {
    if (tty_ && shown_) fmt::print(stderr, "\r\033[K");
    shown_ = false;
  }

  void operator()(double fraction, std::string_view what) {
    const auto now = std::chrono::steady_clock::now();
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    if (elapsed < 1.0) return;
    if (!tty_ && shown_ && now - last_ < std::chrono::seconds(10)) return;
    last_ = now;
    const std::string line = fmt::format("{}: {:3.0f}% after {:.0f} s: {}", label_, 100 * fraction, elapsed, what);
    if (tty_)
      fmt::print(stderr, "\r\033[K{}", line);
    else
      fmt::print(stderr, "{}\n", line);
    std::fflush(stderr);
    shown_ = true;
  }

  // For SimOptions::on_progress (the line must outlive the simulation).
  auto callback() {
    return [this](double fraction, std::string_view what) { (*this)(fraction, what); };
  }

 private:
  std::string label_;
  bool tty_ = false;
  bool shown_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace parlab::cli
