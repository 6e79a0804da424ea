// Training progress on stderr: a redrawn bar when stderr is a terminal, otherwise a
// plain line every `every` epochs (logs and CI stay readable). Both backends' fit use
// it: the CPU's as it runs, the GPU's after its one launch (report_finished_run). The bar's line is kept
// narrower than the terminal (80 columns when its width cannot be read), so that `\r`
// redraws it in place instead of wrapping onto new lines.
#pragma once

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <vector>

namespace tl::detail {

// A run's elapsed time for the progress lines: milliseconds under a second (fits of a
// few hundred small steps take a few of them, which "0.00s" hid), else seconds.
inline void format_elapsed(char (&text)[16], double seconds) {
  if (seconds * 1e3 < 999.5) std::snprintf(text, sizeof text, "%.3gms", seconds * 1e3);  // not "1e+03ms"
  else std::snprintf(text, sizeof text, "%.2fs", seconds);
}

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
      draw(done, loss, now);
      if (done == total_) std::fputc('\n', stderr);
    } else if (done % every_ == 0 || done == total_) {
      char elapsed[16];
      format_elapsed(elapsed, seconds(now));
      std::fprintf(stderr, "epoch %zu/%zu  loss %.6g  %s\n", done, total_, double(loss), elapsed);
    }
  }

 private:
  using clock = std::chrono::steady_clock;
  double seconds(clock::time_point now) const { return std::chrono::duration<double>(now - start_).count(); }

  static int terminal_columns() {
    winsize size{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
    return 80;
  }

  // "[####------] 150/300  loss 0.0314  12.5ms", at most columns - 1 characters (a
  // character in the last column makes some terminals wrap); the bar shrinks first,
  // then goes, then the text is cut.
  void draw(std::size_t done, float loss, clock::time_point now) {
    constexpr int max_bar = 30, min_bar = 5;
    char text[128], elapsed[16];
    format_elapsed(elapsed, seconds(now));
    const int written = std::snprintf(text, sizeof text, " %zu/%zu  loss %.6g  %s", done, total_, double(loss), elapsed);
    const int text_length = std::clamp(written, 0, int(sizeof text) - 1);
    const int room = terminal_columns() - 1;
    const int bar = std::min(max_bar, room - 2 - text_length);
    char line[max_bar + 2 + sizeof text];
    int length = 0;
    if (bar >= min_bar) {
      const int filled = total_ ? static_cast<int>(std::size_t(bar) * done / total_) : bar;
      length = std::snprintf(line, sizeof line, "[%.*s%.*s]%s", filled, "##############################",
                             bar - filled, "------------------------------", text);
    } else {
      length = std::max(0, std::min(room, text_length - 1));  // the text without its leading space
      std::snprintf(line, sizeof line, "%.*s", length, text + 1);
    }
    length = std::clamp(length, 0, std::max(0, room));
    // Spaces over what is left of a longer previous line.
    const int pad = std::clamp(last_length_ - length, 0, std::max(0, room - length));
    std::fprintf(stderr, "\r%.*s%*s", length, line, pad, "");
    last_length_ = length;
  }

  std::size_t total_, every_;
  bool enabled_, terminal_;
  clock::time_point start_, last_draw_;
  int last_length_ = 0;
};

// A run whose epochs all ran in one go (the GPU's single launch or captured graph,
// with nothing to watch meanwhile): its losses afterwards, in the plain lines a live
// run prints every `every` epochs (0: a tenth of the run), the time on the last.
inline void report_finished_run(const std::vector<double>& losses, std::size_t every, double seconds) {
  const std::size_t total = losses.size();
  if (total == 0) return;
  if (every == 0) every = total >= 10 ? total / 10 : 1;
  for (std::size_t done = every; done < total; done += every)
    std::fprintf(stderr, "epoch %zu/%zu  loss %.6g\n", done, total, losses[done - 1]);
  char elapsed[16];
  format_elapsed(elapsed, seconds);
  std::fprintf(stderr, "epoch %zu/%zu  loss %.6g  %s (all epochs in one run on the GPU)\n", total, total,
               losses.back(), elapsed);
}

}  // namespace tl::detail
