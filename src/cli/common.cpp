#include <npc/cli/common.hpp>

#include <cerrno>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/cache/trust.hpp>
#include <npc/util/error.hpp>
#include <npc/util/log.hpp>
#include <npc/util/strings.hpp>

namespace npc::cli {

int run_program(const std::string& program, const std::function<int()>& body) {
  util::setup_logging(program, util::LogLevel::info);
  // Every relative path, and the results file of the original, needs it:
  // one clear line now, not a filesystem error from deep inside later.
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr && errno == ENOENT) {
    spdlog::error("the current directory no longer exists (it was removed); cd to a directory that exists and "
                  "run again");
    return static_cast<int>(ExitCode::environment);
  }
  try {
    return body();
  } catch (const Error& e) {
    if (e.code() == ExitCode::success) return 0; // --help or --version was printed
    spdlog::error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    // Not 1: for the launcher that reads as "one graph failed".
    spdlog::error("internal error: {}", e.what());
    return static_cast<int>(ExitCode::environment);
  }
}

Settings load_settings(const config::CacheSettings& overrides) {
  Settings settings = config::settings_from_environment(overrides);
  if (cache::trust_mode_from_environment() == cache::TrustMode::shared_by_group) {
    // As ccache does for a shared cache: whatever we create in it, the group
    // may write too.
    mode_t old = ::umask(0);
    ::umask(old & ~static_cast<mode_t>(070));
  }
  return settings;
}

} // namespace npc::cli
