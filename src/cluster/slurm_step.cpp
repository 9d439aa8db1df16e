#include <npc/cluster/slurm_step.hpp>

#include <charconv>
#include <unistd.h>

#include <npc/util/strings.hpp>

namespace npc::cluster {

namespace {

std::optional<int> whole_number(const std::optional<std::string>& text) {
  if (!text || text->empty()) return std::nullopt;
  int value = 0;
  auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
  if (ec != std::errc() || end != text->data() + text->size() || value < 0) return std::nullopt;
  return value;
}

std::string this_host() {
  char buffer[256] = {};
  if (::gethostname(buffer, sizeof buffer - 1) != 0) return "unknown-host";
  return buffer;
}

} // namespace

std::string StepTask::label() const {
  return "task " + std::to_string(index) + "/" + std::to_string(count) + " " + node;
}

std::string StepTask::run_name() const {
  return "slurm step " + step + (restarts > 0 ? ", restart " + std::to_string(restarts) : "");
}

std::string StepTask::file_tag() const {
  std::string tag = node + ".task" + std::to_string(index);
  for (char& c : tag) {
    bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                 c == '-' || c == '_';
    if (!plain) c = '_';
  }
  return tag;
}

std::optional<StepTask> step_task_from(const EnvLookup& env, std::string* why_not) {
  auto step_id = env("SLURM_STEP_ID");
  if (!step_id || step_id->empty()) step_id = env("SLURM_STEPID"); // older releases' name
  auto procid = env("SLURM_PROCID");
  if (!step_id || step_id->empty() || !procid) return std::nullopt;
  auto tasks_text = env("SLURM_STEP_NUM_TASKS");
  if (!tasks_text || tasks_text->empty()) tasks_text = env("SLURM_NTASKS");
  auto index = whole_number(procid);
  auto count = whole_number(tasks_text);
  if (!index || !count || *count < 1 || *count > kMaxStepTasks || *index >= *count) {
    if (why_not != nullptr)
      *why_not = "SLURM_PROCID='" + procid.value_or("") + "' and SLURM_STEP_NUM_TASKS='" + tasks_text.value_or("") +
                 "' name no task of the step";
    return std::nullopt;
  }
  StepTask task;
  task.index = *index;
  task.count = *count;
  auto node = env("SLURMD_NODENAME");
  task.node = node && !node->empty() ? *node : this_host();
  auto job = env("SLURM_JOB_ID");
  if (!job || job->empty()) job = env("SLURM_JOBID");
  task.step = job.value_or("?") + "." + *step_id;
  // Not a number: taken as no restart (the variable is Slurm's own).
  if (auto restarts = whole_number(env("SLURM_RESTART_COUNT"))) task.restarts = *restarts;
  return task;
}

std::optional<StepTask> current_step_task(std::string* why_not) {
  return step_task_from([](const char* name) { return util::env(name); }, why_not);
}

} // namespace npc::cluster
