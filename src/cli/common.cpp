#include <npc/cli/common.hpp>

#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <npc/cache/trust.hpp>
#include <npc/util/error.hpp>
#include <npc/util/log.hpp>
#include <npc/util/strings.hpp>

namespace npc::cli {

int run_program(const std::string& program, const std::function<int()>& body) {
  util::setup_logging(program, util::LogLevel::info);
  try {
    return body();
  } catch (const Error& e) {
    if (e.code() == ExitCode::success) return 0; // --help or --version was printed
    spdlog::error("{}", e.what());
    return static_cast<int>(e.code());
  } catch (const std::exception& e) {
    spdlog::error("internal error: {}", e.what());
    return static_cast<int>(ExitCode::failure);
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
