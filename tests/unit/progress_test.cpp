// launcher/progress: the status text, and what the display writes with and
// without a terminal.

#include <algorithm>
#include <cstdio>
#include <string>

#include <gtest/gtest.h>

#include <npc/launcher/progress.hpp>

namespace npc::launcher {
namespace {

ProgressSnapshot snapshot(std::size_t finished, double elapsed, double eta = -1) {
  ProgressSnapshot s;
  s.total = 10;
  s.finished = finished;
  s.running = 2;
  s.failed = 1;
  s.parallel = 4;
  s.elapsed = elapsed;
  s.eta = eta;
  return s;
}

// Everything written to a tmpfile().
std::string contents(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  return text;
}

class ProgressTest : public ::testing::Test {
protected:
  void SetUp() override { file = std::tmpfile(); ASSERT_NE(file, nullptr); }
  void TearDown() override {
    if (file != nullptr) std::fclose(file);
  }
  std::FILE* file = nullptr;
};

TEST(ProgressStatusText, Content) {
  EXPECT_EQ(ProgressDisplay::status_text(snapshot(3, 65, 30)),
            "[3/10] 2 running (of 4), 1 failed, 1m05s elapsed, ETA 30.0s");
  // No history and nothing measured yet: said, never a confident zero.
  EXPECT_EQ(ProgressDisplay::status_text(snapshot(3, 2.5)),
            "[3/10] 2 running (of 4), 1 failed, 2.5s elapsed, ETA unknown");
  // Nothing left to wait for: no ETA.
  EXPECT_EQ(ProgressDisplay::status_text(snapshot(10, 3725, 0)),
            "[10/10] 2 running (of 4), 1 failed, 1h02m elapsed");
  EXPECT_EQ(ProgressDisplay::status_text(snapshot(0, 0, 0)),
            "[0/10] 2 running (of 4), 1 failed, 0.0s elapsed, ETA 0.0s");
}

TEST_F(ProgressTest, PlainOutputHasOneLinePerEventAndRareStatusLines) {
  ProgressDisplay display(file, /*terminal=*/false, /*color=*/false);
  display.update(snapshot(0, 0));
  display.update(snapshot(1, 10));
  display.event("compiled MODULE_a+b in 9.0s");
  display.update(snapshot(1, 29.9));
  display.update(snapshot(2, 30));
  display.event("compiled MODULE_c+d in 20.0s");
  display.update(snapshot(3, 59.9));
  display.update(snapshot(4, 60));
  display.update(snapshot(4, 61));
  display.finish();
  EXPECT_EQ(contents(file),
            "neuron_parallel_compile: [0/10] 2 running (of 4), 1 failed, 0.0s elapsed, ETA unknown\n"
            "neuron_parallel_compile: compiled MODULE_a+b in 9.0s\n"
            "neuron_parallel_compile: [2/10] 2 running (of 4), 1 failed, 30.0s elapsed, ETA unknown\n"
            "neuron_parallel_compile: compiled MODULE_c+d in 20.0s\n"
            "neuron_parallel_compile: [4/10] 2 running (of 4), 1 failed, 1m00s elapsed, ETA unknown\n");
}

TEST_F(ProgressTest, PlainOutputIntervalIsThirtySeconds) {
  EXPECT_EQ(kPlainStatusInterval, 30);
  ProgressDisplay display(file, false, false);
  for (int second = 0; second <= 300; ++second) display.update(snapshot(0, second));
  std::string text = contents(file);
  // At 0, 30, ..., 300: eleven status lines, nothing else.
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 11);
  EXPECT_EQ(text.find('\r'), std::string::npos);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
}

TEST_F(ProgressTest, TerminalRewritesOneLineInPlace) {
  ProgressDisplay display(file, /*terminal=*/true, /*color=*/false);
  display.update(snapshot(1, 5));
  display.update(snapshot(2, 6));
  display.event("compiled MODULE_a+b");
  display.finish();
  const std::string first = "[1/10] 2 running (of 4), 1 failed, 5.0s elapsed, ETA unknown";
  const std::string second = "[2/10] 2 running (of 4), 1 failed, 6.0s elapsed, ETA unknown";
  EXPECT_EQ(contents(file),
            "\r" + first + "\x1b[K"                          // status line
            "\r" + second + "\x1b[K"                         // rewritten in place
            "\r\x1b[K"                                       // cleared for the event
            "neuron_parallel_compile: compiled MODULE_a+b\n" // the event stays
            "\r" + second + "\x1b[K"                         // status shown again
            "\r\x1b[K");                                     // cleared at the end
}

TEST_F(ProgressTest, TerminalWithColourMakesTheStatusBold) {
  ProgressDisplay display(file, true, true);
  display.update(snapshot(1, 5));
  EXPECT_EQ(contents(file), "\r\x1b[1m[1/10] 2 running (of 4), 1 failed, 5.0s elapsed, ETA unknown\x1b[0m\x1b[K");
}

TEST_F(ProgressTest, TerminalStatusIsCutToTheWidth) {
  // A file is not a terminal: its width is taken as 80 columns.
  ProgressDisplay display(file, true, false);
  ProgressSnapshot big;
  big.total = 123456789;
  big.finished = 12345678;
  big.running = 4096;
  big.failed = 1234567;
  big.parallel = 4096;
  big.elapsed = 360000;
  big.eta = 360000;
  ASSERT_GE(ProgressDisplay::status_text(big).size(), 80U);
  display.update(big);
  std::string text = contents(file);
  ASSERT_EQ(text.substr(0, 1), "\r");
  ASSERT_EQ(text.substr(text.size() - 3), "\x1b[K");
  EXPECT_EQ(text.size() - 4, 79U);
  EXPECT_EQ(text.substr(1, 79), ProgressDisplay::status_text(big).substr(0, 79));
}

// --log_level WARNING: no status line and no routine event; a failure is
// shown all the same.
TEST_F(ProgressTest, HiddenRoutineShowsOnlyFailures) {
  ProgressDisplay display(file, /*terminal=*/false, /*color=*/false, ProgressDisplay::Routine::hidden);
  display.update(snapshot(0, 0));
  display.event("compiled MODULE_a+b in 9.0s");
  display.failure("FAILED MODULE_c+d (exit code 70)");
  display.finish();
  EXPECT_EQ(contents(file), "neuron_parallel_compile: FAILED MODULE_c+d (exit code 70)\n");
}

TEST_F(ProgressTest, FinishWithoutAStatusLineWritesNothing) {
  ProgressDisplay terminal(file, true, false);
  terminal.finish();
  ProgressDisplay plain(file, false, false);
  plain.finish();
  EXPECT_EQ(contents(file), "");
}

// Regression (fixed): ProgressDisplay::event() on a terminal redraws the status line from
// the last snapshot even when update() was never called, so the first event
// of a run (a compile that ends within the first tick of pool_runner) is
// followed by a bogus "[0/0] 0 running (of 0), 0 failed, 0.0s elapsed" line.
// Suggested fix: in event(), redraw only when a status line had been shown
// (remember that in clear_line() before resetting line_shown_).
TEST_F(ProgressTest, TerminalEventBeforeAnyStatusShowsNoEmptyStatus) {
  ProgressDisplay display(file, true, false);
  display.event("compiled MODULE_a+b");
  display.finish();
  EXPECT_EQ(contents(file), "neuron_parallel_compile: compiled MODULE_a+b\n");
}

} // namespace
} // namespace npc::launcher
