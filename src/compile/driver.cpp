#include <npc/compile/driver.hpp>

#include <csignal>

#include <spdlog/spdlog.h>

#include <npc/compile/target.hpp>
#include <npc/util/clock.hpp>
#include <npc/util/error.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/shell_words.hpp>
#include <npc/util/signals.hpp>
#include <npc/util/strings.hpp>

namespace npc::compile {

namespace {

int remaining_ms(double deadline) {
  double left = deadline - util::monotonic_seconds();
  return left <= 0 ? 0 : static_cast<int>(left * 1000) + 1;
}

} // namespace

std::string CompileRun::describe() const {
  if (timed_out) return "timed out after " + util::format_seconds(timeout_seconds);
  if (interrupted_by != 0) return "interrupted by " + util::signal_name(interrupted_by);
  return status.describe();
}

std::vector<std::string> compiler_argv(const CompileJob& job) {
  if (!job.argv.empty()) return job.argv;
  std::vector<std::string> argv = {job.compiler.string(), "compile", "--framework=XLA",
                                   job.graph.string(),    "--output", job.output_neff.string()};
  argv.insert(argv.end(), job.flags.begin(), job.flags.end());
  if (auto target = target_for(job.flags)) argv.push_back("--target=" + *target);
  return argv;
}

CompileRun run_compiler(const CompileJob& job) {
  CompileRun run;
  run.argv = compiler_argv(job);
  // Blocked from before the spawn, so no SIGCHLD or interrupt can be missed.
  util::SignalWatcher signals({SIGCHLD, SIGINT, SIGTERM, SIGHUP});

  util::SpawnOptions options;
  options.argv = run.argv;
  options.environment = job.environment;
  options.working_dir = job.working_dir;
  options.output = util::OutputTo::file;
  options.output_file = job.log_file;
  if (job.output_to_caller) {
    options.output = util::OutputTo::inherit;
    if (auto s = util::write_file_atomic(job.log_file, "the compiler's output went to the caller\n", util::Overwrite::yes);
        !s)
      throw EnvironmentError("cannot write " + job.log_file.string() + ": " + s.error());
  }
  // If we are killed (-9, the OOM killer), nobody would publish the result:
  // the compiler goes with us instead of compiling on as an orphan.
  options.die_with_parent = true;
  spdlog::debug("running {} in {}", util::join_shell_words(run.argv), job.working_dir.string());
  double start = util::monotonic_seconds();
  auto child = util::spawn(options);
  if (!child) throw EnvironmentError("cannot start the compiler: " + child.error());
  pid_t pid = child->pid;

  double deadline = job.timeout ? start + static_cast<double>(job.timeout->count()) / 1000.0 : 0;
  double kill_at = 0; // when a group we signalled gets SIGKILL
  for (;;) {
    if (auto status = util::try_wait_child(pid)) {
      run.status = *status;
      break;
    }
    int wait_ms = -1;
    if (kill_at > 0) wait_ms = remaining_ms(kill_at);
    else if (job.timeout) wait_ms = remaining_ms(deadline);
    auto received = signals.wait(wait_ms);
    for (int sig : received) {
      if (sig == SIGCHLD || run.interrupted_by != 0) continue;
      run.interrupted_by = sig;
      util::kill_process_group(pid, sig);
      kill_at = util::monotonic_seconds() + std::chrono::duration<double>(kInterruptGrace).count();
    }
    double now = util::monotonic_seconds();
    if (kill_at > 0 && now >= kill_at) {
      util::kill_process_group(pid, SIGKILL);
      kill_at = now + 3600; // once
    } else if (job.timeout && !run.timed_out && run.interrupted_by == 0 && now >= deadline) {
      run.timed_out = true;
      run.timeout_seconds = std::chrono::duration<double>(*job.timeout).count();
      util::kill_process_group(pid, SIGKILL);
    }
  }
  // Grandchildren the compiler left in its group go too.
  util::kill_process_group(pid, SIGKILL);
  run.wall_seconds = util::monotonic_seconds() - start;
  return run;
}

} // namespace npc::compile
