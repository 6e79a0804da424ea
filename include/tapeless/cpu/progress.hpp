// Training progress on stderr: a redrawn bar when stderr is a terminal, otherwise a
// plain line every `every` epochs (logs and CI stay readable).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>

namespace tl::detail {

class progress_printer {
 public:
  progress_printer(std::size_t total, std::size_t every, bool enabled)
      : total_(total), every_(every ? every : (total >= 10 ? total / 10 : 1)), enabled_(enabled),
        terminal_(isatty(STDERR_FILENO) == 1), start_(clock::now()), last_draw_(start_) {}

  void update(std::size_t done, float loss) {
    if (!enabled_) return;
    const auto now = clock::now();
    if (terminal_) {
      if (done != total_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
      last_draw_ = now;
      constexpr int width = 30;
      const int filled = static_cast<int>(width * done / total_);
      std::fprintf(stderr, "\r[%.*s%.*s] %zu/%zu  loss %.6g  %.2fs", filled, "##############################",
                   width - filled, "------------------------------", done, total_, double(loss), seconds(now));
      if (done == total_) std::fputc('\n', stderr);
    } else if (done % every_ == 0 || done == total_) {
      std::fprintf(stderr, "epoch %zu/%zu  loss %.6g  %.2fs\n", done, total_, double(loss), seconds(now));
    }
  }

 private:
  using clock = std::chrono::steady_clock;
  double seconds(clock::time_point now) const { return std::chrono::duration<double>(now - start_).count(); }

  std::size_t total_, every_;
  bool enabled_, terminal_;
  clock::time_point start_, last_draw_;
};

}  // namespace tl::detail
