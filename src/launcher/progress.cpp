#include <npc/launcher/progress.hpp>

#include <sys/ioctl.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/util/log.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

namespace {
int terminal_width(std::FILE* out) {
  struct winsize ws {};
  if (::ioctl(fileno(out), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  return 80;
}
} // namespace

ProgressDisplay::ProgressDisplay(std::FILE* out, bool terminal, bool color, Routine routine)
    : out_(out), terminal_(terminal), color_(color), routine_(routine) {}

ProgressDisplay ProgressDisplay::for_stream(std::FILE* out) {
  bool terminal = ::isatty(fileno(out)) != 0;
  auto term = util::env("TERM");
  if (term && *term == "dumb") terminal = false;
  bool color = terminal && !util::env("NO_COLOR").has_value();
  return ProgressDisplay(out, terminal, color,
                         spdlog::should_log(spdlog::level::info) ? Routine::shown : Routine::hidden);
}

std::string ProgressDisplay::status_text(const ProgressSnapshot& s) {
  std::string text = "[" + std::to_string(s.finished) + "/" + std::to_string(s.total) + "] " +
                     std::to_string(s.running) + " running (of " + std::to_string(s.parallel) + "), " +
                     std::to_string(s.failed) + " failed, " + util::format_seconds(s.elapsed) + " elapsed";
  if (s.finished < s.total) text += s.eta >= 0 ? ", ETA " + util::format_seconds(s.eta) : ", ETA unknown";
  return text;
}

void ProgressDisplay::clear_line() {
  if (terminal_ && line_shown_) {
    std::fputs("\r\x1b[K", out_);
    line_shown_ = false;
  }
}

void ProgressDisplay::update(const ProgressSnapshot& snapshot) {
  last_ = snapshot;
  if (routine_ == Routine::hidden) return;
  std::string text = status_text(snapshot);
  if (terminal_) {
    int width = terminal_width(out_);
    if (static_cast<int>(text.size()) >= width) text.resize(static_cast<size_t>(std::max(width - 1, 10)));
    std::fputs("\r", out_);
    if (color_) std::fputs("\x1b[1m", out_);
    std::fputs(text.c_str(), out_);
    if (color_) std::fputs("\x1b[0m", out_);
    std::fputs("\x1b[K", out_);
    std::fflush(out_);
    line_shown_ = true;
    return;
  }
  if (snapshot.elapsed - last_plain_ >= kPlainStatusInterval) {
    std::fprintf(out_, "neuron_parallel_compile: %s%s\n", util::log_context().c_str(), text.c_str());
    std::fflush(out_);
    last_plain_ = snapshot.elapsed;
  }
}

void ProgressDisplay::event(const std::string& line) {
  if (routine_ == Routine::shown) failure(line);
}

void ProgressDisplay::failure(const std::string& line) {
  bool was_shown = line_shown_;
  clear_line();
  std::fprintf(out_, "neuron_parallel_compile: %s%s\n", util::log_context().c_str(), line.c_str());
  if (terminal_ && was_shown) update(last_);
  std::fflush(out_);
}

void ProgressDisplay::finish() {
  clear_line();
  std::fflush(out_);
}

} // namespace npc::launcher
