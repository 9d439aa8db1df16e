#include <npc/launcher/run_trace.hpp>

#include <cmath>

namespace npc::launcher {

using nlohmann::json;

namespace {

constexpr std::int64_t kPhaseLane = 0;

std::string_view outcome_name(AttemptEnd end) {
  switch (end) {
  case AttemptEnd::compiled: return "compiled";
  case AttemptEnd::already_done: return "compiled by another process";
  case AttemptEnd::failed: return "failed";
  case AttemptEnd::killed: return "killed";
  case AttemptEnd::locked_elsewhere: return "locked by another process";
  case AttemptEnd::cached_failure: return "failed in another process";
  case AttemptEnd::failed_in_run: return "failed in this run by another launcher";
  case AttemptEnd::removed: return "removed by another process";
  case AttemptEnd::no_space: return "no space";
  }
  return "?";
}

std::string entry_name(const Pool& pool, std::size_t i) { return pool.items()[i].entry_dir.filename().string(); }

constexpr double kMiB = 1024.0 * 1024.0;

} // namespace

RunTrace::RunTrace(std::string process_name, double monotonic_now, std::int64_t epoch_us_now)
    : events_(1), monotonic_zero_(monotonic_now), epoch_us_zero_(epoch_us_now) {
  events_.name_process(process_name);
  events_.name_lane(kPhaseLane, "launcher", 0);
}

std::int64_t RunTrace::epoch_us(double monotonic) const {
  return epoch_us_zero_ + static_cast<std::int64_t>(std::llround((monotonic - monotonic_zero_) * 1e6));
}

void RunTrace::phase(const std::string& name, double started, double ended, json args) {
  events_.complete(name, "phase", kPhaseLane, epoch_us(started), epoch_us(ended) - epoch_us(started),
                   std::move(args));
}

std::size_t RunTrace::take_slot() {
  for (std::size_t s = 0; s < slot_busy_.size(); ++s)
    if (!slot_busy_[s]) {
      slot_busy_[s] = true;
      return s;
    }
  slot_busy_.push_back(true);
  const std::size_t s = slot_busy_.size() - 1;
  events_.name_lane(static_cast<std::int64_t>(s + 1), "worker slot " + std::to_string(s + 1),
                    static_cast<std::int64_t>(s + 1));
  return s;
}

void RunTrace::attempt_started(std::size_t i, double now) { running_[i] = {take_slot(), now}; }

void RunTrace::attempt_ended(const Pool& pool, std::size_t i, AttemptEnd end, const AttemptInfo& info, double now) {
  end_span(pool, i, outcome_name(end), info, now);
}

void RunTrace::end_span(const Pool& pool, std::size_t i, std::string_view outcome, const AttemptInfo& info,
                        double now) {
  auto found = running_.find(i);
  if (found == running_.end()) return;
  const auto [slot, started] = found->second;
  running_.erase(found);
  slot_busy_[slot] = false;
  const ItemProgress& p = pool.progress()[i];
  json args = {{"outcome", outcome},
               {"attempt", p.attempts},
               {"retry", p.attempts - 1},
               {"exit", info.exit},
               {"peak_rss_mib", std::round(static_cast<double>(info.peak_rss_bytes) / kMiB * 10) / 10},
               {"graph_bytes", pool.items()[i].graph_bytes},
               {"log", info.log_path.string()}};
  if (pool.items()[i].predicted.seconds > 0)
    args["predicted_seconds"] = std::round(pool.items()[i].predicted.seconds * 1000) / 1000;
  events_.complete(entry_name(pool, i), "compile", static_cast<std::int64_t>(slot + 1), epoch_us(started),
                   epoch_us(now) - epoch_us(started), std::move(args));
}

void RunTrace::load(const Pool& pool, double now) {
  const std::uint64_t admitted = pool.memory_in_use();
  const int running = pool.running();
  if (last_load_ && last_load_->first == admitted && last_load_->second == running) return;
  last_load_ = {admitted, running};
  const std::int64_t at = epoch_us(now);
  json memory = {{"admitted_mib", std::round(static_cast<double>(admitted) / kMiB)}};
  events_.counter("memory admitted", at, std::move(memory));
  events_.counter("compiles running", at, {{"running", running}, {"limit", pool.parallel_limit()}});
}

void RunTrace::waits(const Pool& pool, double now) {
  const auto& progress = pool.progress();
  for (std::size_t i = 0; i < progress.size(); ++i) {
    const bool deferred = progress[i].state == ItemState::deferred;
    auto open = waiting_.find(i);
    if (deferred && open == waiting_.end()) {
      waiting_.emplace(i, now);
      events_.async_begin(entry_name(pool, i), "wait", i, epoch_us(now),
                          {{"held_by", progress[i].held_elsewhere ? "another host" : "another process"}});
    } else if (!deferred && open != waiting_.end()) {
      waiting_.erase(open);
      events_.async_end(entry_name(pool, i), "wait", i, epoch_us(now));
    }
  }
}

void RunTrace::close(const Pool& pool, double now) {
  for (const auto& [i, since] : waiting_) events_.async_end(entry_name(pool, i), "wait", i, epoch_us(now));
  waiting_.clear();
  auto running = running_;
  for (const auto& [i, slot_started] : running)
    end_span(pool, i, "interrupted", AttemptInfo{0, "stopped by an interrupt", 0, {}, Blame::surroundings}, now);
  load(pool, now);
}

Status RunTrace::write(const fs::path& path, const json& other_data) const { return events_.write(path, other_data); }

fs::path trace_path_for_task(const fs::path& path, const std::string& task_tag) {
  if (task_tag.empty()) return path;
  fs::path tagged = path;
  const std::string extension = path.extension().string();
  tagged.replace_filename(path.stem().string() + "." + task_tag + extension);
  return tagged;
}

} // namespace npc::launcher
