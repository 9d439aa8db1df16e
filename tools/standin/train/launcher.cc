#include "launcher.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>

#include "error.h"
#include "files.h"
#include "protocol.h"
#include "rank.h"
#include "spawn.h"
#include "summary.h"
#include "workdir.h"

namespace standin::train {
namespace {

// The running binary, so ranks run the same program even if argv[0] was a
// bare name found through PATH.
std::string self_executable() {
  std::string buffer(4096, '\0');
  const ssize_t length = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (length <= 0) throw failure("cannot find our own executable: " + errno_text());
  buffer.resize(static_cast<std::size_t>(length));
  return buffer;
}

// Ranks to pass a termination signal on to, as torchrun does; the handler
// may only touch these lock-free globals.
pid_t g_rank_pids[kMaxRanks];
std::atomic<long> g_rank_count{0};
// A signal that came while ranks were still being started: the ones started
// after it get it too, and no more are started.
std::atomic<int> g_received_signal{0};
constexpr int kForwardedSignals[] = {SIGINT, SIGTERM, SIGHUP};

void forward_signal(int signal_number) {
  g_received_signal.store(signal_number);
  const long count = g_rank_count.load();
  for (long i = 0; i < count; ++i) ::kill(g_rank_pids[i], signal_number);
}

// The launcher keeps running after forwarding: it then sees the ranks die,
// returns their status and removes its temporary work directory.
void install_signal_forwarding() {
  struct sigaction action {};
  action.sa_handler = forward_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int signal_number : kForwardedSignals) sigaction(signal_number, &action, nullptr);
}

void track_rank(pid_t pid) {
  const long index = g_rank_count.load();
  if (index >= kMaxRanks) return;
  g_rank_pids[index] = pid;
  g_rank_count.store(index + 1);
}

}  // namespace

int run_launcher(const TrainOptions& options, const std::string& argv0,
                 const std::vector<std::string>& args) {
  const Workdir workdir(options.workdir);
  std::vector<std::string> rank_argv{argv0};
  rank_argv.insert(rank_argv.end(), args.begin(), args.end());
  // Ranks must share our directory so the totals can be collected; the
  // last --workdir wins, as with argparse.
  if (workdir.is_temporary()) rank_argv.push_back("--workdir=" + workdir.path());
  // Resolved here (a bad STANDIN_TRAIN_PROTOCOL fails before any rank
  // starts) and passed on explicitly, whichever way it was chosen.
  rank_argv.push_back(std::string("--protocol=") + protocol_name(resolve_protocol(options.protocol)));

  const std::string self = self_executable();
  const std::string world = std::to_string(options.nproc_per_node);
  std::vector<pid_t> pids;
  std::vector<int> statuses;
  install_signal_forwarding();
  try {
    for (long rank = 0; rank < options.nproc_per_node && g_received_signal.load() == 0; ++rank) {
      const std::string r = std::to_string(rank);
      const EnvOverrides env{{"RANK", r}, {"LOCAL_RANK", r}, {"WORLD_SIZE", world},
                             {"LOCAL_WORLD_SIZE", world}};
      pids.push_back(spawn_process(self, rank_argv, environment_with(env)));
      track_rank(pids.back());
      // The handler may have run between the spawn and the tracking.
      if (const int signal_number = g_received_signal.load()) ::kill(pids.back(), signal_number);
    }
  } catch (...) {
    for (pid_t pid : pids) wait_exit_status(pid);
    throw;
  }
  for (pid_t pid : pids) statuses.push_back(poll_exit_status(pid));

  for (std::size_t rank = 0; rank < statuses.size(); ++rank) {
    if (statuses[rank] == 0) continue;
    std::cerr << kProgramName << ": rank " << rank << " exited with status " << statuses[rank]
              << std::endl;
    return statuses[rank];
  }
  // Stopped before every rank was started (or as they finished): report the
  // signal, as a shell would.
  if (const int signal_number = g_received_signal.load()) return 128 + signal_number;
  std::vector<RankSummary> summaries;
  for (long rank = 0; rank < options.nproc_per_node; ++rank) {
    summaries.push_back(load_summary(rank_directory(workdir.path(), rank) + "/" + kSummaryFile));
  }
  std::cout << total_line(summaries) << std::endl;
  return 0;
}

}  // namespace standin::train
