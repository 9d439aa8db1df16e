#include <npc/launcher/pool_progress.hpp>

#include <algorithm>

#include <spdlog/spdlog.h>

#include <npc/util/strings.hpp>

namespace npc::launcher {

std::string short_name(const WorkItem& item) { return item.entry_dir.filename().string(); }

ProgressSnapshot snapshot(const Pool& pool, double elapsed, double now) {
  ProgressSnapshot s;
  s.total = pool.items().size();
  s.failed = pool.count(ItemState::failed);
  s.finished = pool.count(ItemState::compiled) + pool.count(ItemState::cached) +
               pool.count(ItemState::compiled_elsewhere) + pool.count(ItemState::removed_elsewhere) + s.failed;
  s.running = static_cast<std::size_t>(pool.running());
  s.parallel = pool.parallel_limit();
  s.elapsed = elapsed;
  auto work = pool.remaining_work(now);
  s.eta = work ? *work / std::max(1, pool.parallel_limit()) : -1;
  return s;
}

void tell(ProgressDisplay& progress, const Pool& pool, const AttemptEnded& ended) {
  const WorkItem& item = pool.items()[ended.item];
  const ItemProgress& p = pool.progress()[ended.item];
  const AttemptInfo& info = ended.info;
  switch (ended.end) {
  case AttemptEnd::compiled:
    progress.event("compiled " + short_name(item) + " in " + util::format_seconds(info.wall_seconds));
    break;
  case AttemptEnd::already_done:
    progress.event("compiled by another process: " + short_name(item));
    break;
  case AttemptEnd::locked_elsewhere:
    spdlog::debug("{} is held by another process; looked at again later", short_name(item));
    break;
  case AttemptEnd::removed:
    progress.event("removed by another process (not compiled): " + short_name(item));
    break;
  case AttemptEnd::cached_failure:
    progress.failure("FAILED " + short_name(item) + " (" + info.exit + "); log " + info.log_path.string());
    break;
  case AttemptEnd::failed_in_run: progress.failure("FAILED " + short_name(item) + " (" + info.exit + ")"); break;
  case AttemptEnd::no_space:
    progress.failure("FAILED " + short_name(item) + " (" + info.exit + "); no new compile starts; the graphs "
                   "not compiled stay pending for a rerun once space is freed");
    break;
  case AttemptEnd::killed:
  case AttemptEnd::failed:
    if (p.state == ItemState::retry_wait)
      progress.event("attempt " + std::to_string(p.attempts) + " of " + short_name(item) + " failed (" +
                     info.exit + "); retrying" +
                     (ended.end != AttemptEnd::killed ? ""
                      : p.alone                       ? " alone, once the compiles running now end"
                                                      : " with " + std::to_string(pool.parallel_limit()) + " at once"));
    else
      progress.failure("FAILED " + short_name(item) + " (" + info.exit + ") after " +
                     std::to_string(p.attempts) + " attempt(s); log " + info.log_path.string());
    break;
  }
}

} // namespace npc::launcher
