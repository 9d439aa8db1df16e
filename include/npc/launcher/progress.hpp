#pragma once
// The progress display. On a terminal: one status line rewritten in place
// ("\r" and clear-to-end), cut to the terminal's width. Without one: a plain
// line for each finished graph and a status line at most every 30 s, which a
// CI log keeps readably. NO_COLOR turns colour off.

#include <cstdio>
#include <string>

namespace npc::launcher {

struct ProgressSnapshot {
  std::size_t total = 0;
  std::size_t finished = 0; // compiled, cached or failed
  std::size_t running = 0;
  std::size_t failed = 0;
  int parallel = 0;
  double elapsed = 0;
  double eta = -1; // seconds; < 0 unknown (no history, nothing measured yet)
};

// Without a terminal, the status line is repeated at most this often.
inline constexpr double kPlainStatusInterval = 30;

class ProgressDisplay {
public:
  // `routine`: whether the status line and routine events are shown
  // (--log_level INFO or DEBUG); failures are shown in any case.
  enum class Routine { shown, hidden };
  ProgressDisplay(std::FILE* out, bool terminal, bool color, Routine routine = Routine::shown);
  // Picks terminal/colour from the stream and the environment, and whether
  // routine lines are shown from the log level.
  static ProgressDisplay for_stream(std::FILE* out);

  void update(const ProgressSnapshot& snapshot);
  // A line that stays (a finished graph, a retry): printed above the status line.
  void event(const std::string& line);
  // A line that stays and that no log level hides (a graph that failed).
  void failure(const std::string& line);
  void finish(); // clears the status line

  [[nodiscard]] static std::string status_text(const ProgressSnapshot& snapshot);

private:
  void clear_line();
  std::FILE* out_;
  bool terminal_;
  bool color_;
  Routine routine_;
  bool line_shown_ = false;
  double last_plain_ = -1e9;
  ProgressSnapshot last_;
};

} // namespace npc::launcher
