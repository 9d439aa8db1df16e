// neuron_parallel_compile: run a training command's trial in graph-extraction
// mode, then compile every graph it dumped, in parallel, into the cache.

#include <npc/cache/store.hpp>
#include <npc/cli/common.hpp>
#include <npc/cli/programs.hpp>
#include <npc/launcher/launcher.hpp>
#include <npc/util/error.hpp>
#include <npc/util/log.hpp>

namespace npc::cli {

int neuron_parallel_compile_main(int argc, char** argv) {
  return run_program("neuron_parallel_compile", [&]() -> int {
    cache::set_lock_tool_name("neuron_parallel_compile");
    launcher::Options options = launcher::parse_options(argc, argv);
    // Many tasks of a Slurm step write into one log: each line says whose it is.
    if (options.step) util::set_log_context(options.step->label());
    Settings settings = load_settings({});
    if (options.log_level) {
      util::LogLevel level{};
      if (util::parse_log_level(*options.log_level, level)) util::set_log_level(level);
    }
    return launcher::run(options, settings);
  });
}

} // namespace npc::cli
