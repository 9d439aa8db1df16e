#include <npc/cluster/step_meeting.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <npc/cache/layout.hpp>
#include <npc/cache/store.hpp>
#include <npc/cluster/launcher_roll.hpp>
#include <npc/storage/lock.hpp>

namespace npc::cluster {

namespace {

// A record is a few keys a graph: even 100,000 graphs stay below this.
constexpr std::uint64_t kMaxRecordBytes = 64ull << 20;

std::string record_key(const std::string& folder, int task) {
  return folder + "/task-" + std::to_string(task) + ".json";
}

// A step's folder is left behind when its task 0 dies before it gathers (the
// other tasks' records stay) or is cancelled: it is another step's to
// remove once nothing in it has changed for this long and none of its
// tasks is on the roll. A live step has a task on the roll (at work) or is
// gathered within seconds of its last record; ten minutes is far beyond
// that, and short enough that leftovers never pile up.
constexpr auto kLeftStepAge = std::chrono::minutes(10);

std::string steps_dir() { return std::string(cache::kPrivateDir) + "/steps"; }

// A step id as a name: digits, letters, '.', and anything else as '_'.
std::string safe_step(const std::string& step) {
  std::string name = step;
  for (char& c : name)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '_'))
      c = '_';
  return name;
}
std::string folder_of(const StepTask& task) { return steps_dir() + "/" + safe_step(task.step); }
// Every task of the step named `step` (safe_step) is on the roll under this.
std::string member_prefix(const std::string& step) { return "slurm-" + step + ".task-"; }

// Whether a task of the step named `step` is on the roll, alive, as far as
// `roll` (its listing) and the records read tell. A look that fails counts
// as alive: this is cleanup, and a live step must not lose its records.
bool step_on_roll(storage::Storage& storage, const std::vector<storage::TreeFile>& roll, const std::string& step,
                  storage::Time now) {
  const std::string prefix = member_prefix(step);
  for (const auto& file : roll) {
    if (!file.key.starts_with(prefix)) continue;
    auto judged = storage::judge_lock(storage, std::string(kRollFolder) + "/" + file.key,
                                      storage::kDefaultStaleLockAge, now);
    if (!judged || judged->blocks()) return true;
  }
  return false;
}

// Removes the folders of steps other than `own` that were left behind
// (kLeftStepAge): what a task 0 that died before gathering leaves. A look
// that fails is only logged: this is cleanup, not the task's work.
void remove_left_steps(storage::Storage& storage, const std::string& own, storage::Time now) {
  auto files = storage.list_tree(steps_dir());
  if (!files) {
    spdlog::debug("cannot look for steps left behind in {}: {}", storage.describe(steps_dir()), files.error());
    return;
  }
  auto roll = storage.list_tree(kRollFolder);
  if (!roll) {
    spdlog::debug("cannot look for steps left behind: the roll at {}: {}", storage.describe(kRollFolder),
                  roll.error());
    return;
  }
  std::map<std::string, storage::Time> steps; // folder name: its newest file
  for (const auto& file : *files) {
    const auto slash = file.key.find('/');
    if (slash == std::string::npos) continue;
    const std::string name = file.key.substr(0, slash);
    if (steps_dir() + "/" + name == own) continue;
    steps[name] = std::max(steps[name], file.modified);
  }
  for (const auto& [name, newest] : steps) {
    if (now - newest < kLeftStepAge || step_on_roll(storage, *roll, name, now)) continue;
    const std::string folder = steps_dir() + "/" + name;
    if (auto removed = storage.remove_tree(folder); !removed)
      spdlog::debug("cannot remove {}, left by a step: {}", storage.describe(folder), removed.error());
    else if (*removed)
      spdlog::debug("removed {}, left by a step whose task 0 did not gather it", storage.describe(folder));
  }
}

// Whether a task's record is the one it writes at its end (an older
// release wrote no other: a record without "ended" is one).
bool ended(const nlohmann::json& record) {
  auto it = record.find("ended");
  return it == record.end() || !it->is_boolean() || it->get<bool>();
}

} // namespace

std::string step_member_name(const StepTask& task, int index) {
  return member_prefix(safe_step(task.step)) + std::to_string(index);
}

std::string StepTotals::line() const {
  return "Slurm step " + step + ": " + std::to_string(graphs) + " graphs: " + std::to_string(compiled) +
         " compiled by " + std::to_string(compiling_tasks) + " task" + (compiling_tasks == 1 ? "" : "s") + ", " +
         std::to_string(already_done) + " already done, " + std::to_string(failed) + " failed, " +
         std::to_string(left) + " left (" + std::to_string(reported.size()) + " of " + std::to_string(tasks) +
         " tasks reported)";
}

StepMeeting::StepMeeting(std::shared_ptr<storage::Storage> storage, StepTask task, std::string folder)
    : storage_(std::move(storage)), task_(std::move(task)), folder_(std::move(folder)) {}

Result<StepMeeting> StepMeeting::join(std::shared_ptr<storage::Storage> storage,
                                      std::shared_ptr<storage::Storage> lease_connection, const StepTask& task) {
  StepMeeting meeting(std::move(storage), task, folder_of(task));
  auto member = LauncherRoll::join(meeting.storage_, std::move(lease_connection), step_member_name(task, task.index),
                                   "task " + std::to_string(task.index) + " of Slurm step " + task.step);
  if (!member) return fail(member.error());
  meeting.member_ = std::move(*member);
  // A requeued job keeps its id: what its earlier run left is not this run's.
  if (auto s = meeting.storage_->remove(record_key(meeting.folder_, task.index)); !s) return fail(s.error());
  remove_left_steps(*meeting.storage_, meeting.folder_, std::chrono::system_clock::now());
  return meeting;
}

namespace {

// Task `task`'s record, its graphs and counts in `fields`, written whole in
// place of the one before.
Status write_record(storage::Storage& storage, const std::string& folder, const StepTask& task,
                    nlohmann::json fields) {
  fields["task"] = task.index;
  fields["tasks"] = task.count;
  fields["node"] = task.node;
  return status_of(storage.write(record_key(folder, task.index), fields.dump(), storage::IfPresent::replace));
}

} // namespace

Status StepMeeting::found(const std::vector<std::string>& graphs) {
  return write_record(*storage_, folder_, task_, {{"graphs", graphs}, {"ended", false}});
}

Status StepMeeting::report(const TaskTotals& mine) {
  return write_record(*storage_, folder_, task_,
                      {{"graphs", mine.graphs},
                       {"compiled", mine.compiled},
                       {"done", mine.done},
                       {"failed", mine.failed},
                       {"ended", true}});
}



namespace {

// Task `t`'s record, read into `record`, once the task ended or is gone (off
// the roll, or its lease stale); false while it is still at work.
Result<bool> settle_task(const storage::Storage& storage, const std::string& folder, const StepTask& task, int t,
                         const std::function<storage::Time()>& now, nlohmann::json& record,
                         std::vector<int>& reported) {
  if (auto text = storage.read(record_key(folder, t), kMaxRecordBytes)) {
    auto parsed = nlohmann::json::parse(*text, nullptr, false);
    if (parsed.is_discarded() || !parsed.is_object()) {
      spdlog::warn("the record of task {} of Slurm step {} ({}) is not JSON; its graphs are not counted", t,
                   task.step, storage.describe(record_key(folder, t)));
      return true;
    }
    record = std::move(parsed);
    if (ended(record)) {
      reported.push_back(t);
      return true;
    }
  }
  // No record of its end (yet): is the task still at work, its lease on the
  // roll?
  auto lock = storage::judge_lock(storage, LauncherRoll::record_key(step_member_name(task, t)),
                                  storage::kDefaultStaleLockAge, now());
  if (!lock) return fail(lock.error());
  if (lock->blocks()) return false;
  // Gone. A last look at the record, which a task writes before it leaves
  // the roll; else the graphs it found, if it said, are counted without it.
  if (auto late = storage.read(record_key(folder, t), kMaxRecordBytes)) {
    auto parsed = nlohmann::json::parse(*late, nullptr, false);
    if (!parsed.is_discarded() && parsed.is_object()) {
      record = std::move(parsed);
      if (ended(record)) reported.push_back(t);
    }
  }
  return true;
}

// The step's counts from its tasks' records (a record that is no object
// counts nothing).
void add_up(const std::vector<nlohmann::json>& records, StepTotals& totals) {
  std::set<std::string> graphs, compiled, done, failed;
  for (const auto& r : records) {
    if (!r.is_object()) continue;
    auto add = [&](const char* field, std::set<std::string>& into) {
      if (auto it = r.find(field); it != r.end() && it->is_array())
        for (const auto& key : *it)
          if (key.is_string()) into.insert(key.get<std::string>());
    };
    add("graphs", graphs);
    std::set<std::string> mine;
    add("compiled", mine);
    if (!mine.empty()) ++totals.compiling_tasks;
    compiled.insert(mine.begin(), mine.end());
    add("done", done);
    add("failed", failed);
  }
  totals.graphs = graphs.size();
  totals.compiled = compiled.size();
  for (const auto& key : graphs) {
    if (compiled.contains(key)) continue;
    // Done in some task's view but compiled by none of them: cached
    // before the step, or finished by a process outside it.
    if (done.contains(key)) ++totals.already_done;
    else if (failed.contains(key)) ++totals.failed;
    else ++totals.left;
  }
}

} // namespace

Result<StepTotals> StepMeeting::gather(std::chrono::milliseconds poll, const std::function<storage::Time()>& now) {
  StepTotals totals;
  totals.step = task_.step;
  totals.tasks = task_.count;
  std::vector<nlohmann::json> records(static_cast<std::size_t>(task_.count));
  std::vector<bool> settled(static_cast<std::size_t>(task_.count), false);
  bool said_waiting = false;
  for (;;) {
    std::vector<int> waiting_for;
    for (int t = 0; t < task_.count; ++t) {
      auto i = static_cast<std::size_t>(t);
      if (settled[i]) continue;
      auto done = settle_task(*storage_, folder_, task_, t, now, records[i], totals.reported);
      if (!done) return fail(done.error());
      if (*done) settled[i] = true;
      else waiting_for.push_back(t);
    }
    if (waiting_for.empty()) break;
    if (!said_waiting) {
      std::string which;
      for (int t : waiting_for) which += (which.empty() ? "" : ", ") + std::to_string(t);
      spdlog::info("waiting for task(s) {} of Slurm step {} to end, for the step's totals", which, task_.step);
      said_waiting = true;
    }
    std::this_thread::sleep_for(poll);
  }
  std::sort(totals.reported.begin(), totals.reported.end());
  add_up(records, totals);
  for (int t = 0; t < task_.count; ++t) std::ignore = storage_->remove(record_key(folder_, t));
  // The folder itself (empty now in a directory; nothing left of it in S3).
  std::ignore = storage_->remove_tree(folder_);
  return totals;
}

} // namespace npc::cluster
