#include <npc/cli/masquerade_dir.hpp>

#include <cstdio>
#include <string>
#include <system_error>

#include <npc/compile/compiler.hpp>
#include <npc/util/error.hpp>

namespace npc::cli {

namespace {

// Where this installation keeps its programs: the directory of /proc/self/exe.
fs::path own_bin_dir() {
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) throw EnvironmentError("cannot find this program's own path in /proc/self/exe: " + ec.message());
  return self.parent_path();
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::equivalent(a, b, ec);
}

} // namespace

int cmd_masquerade_dir(const std::optional<fs::path>& create) {
  const fs::path wrapper = own_bin_dir() / "neuron_cc_wrapper";
  if (!fs::exists(wrapper))
    throw EnvironmentError("no neuron_cc_wrapper beside this program (" + wrapper.string() +
                           "): reinstall neuron-parallel-compile");
  fs::path dir;
  if (create) {
    dir = fs::absolute(*create).lexically_normal();
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw EnvironmentError("cannot create " + dir.string() + ": " + ec.message());
    const fs::path link = dir / compile::kCompilerName;
    if (fs::is_symlink(link, ec) || fs::exists(link, ec)) {
      if (!same_file(link, wrapper))
        throw EnvironmentError(link.string() + " exists and is not " + wrapper.string() +
                               ": remove it, or choose another directory");
    } else {
      fs::create_symlink(wrapper, link, ec);
      if (ec) throw EnvironmentError("cannot create the link " + link.string() + ": " + ec.message());
    }
  } else {
    dir = (own_bin_dir() / NPC_MASQUERADE_DIR_FROM_BIN).lexically_normal();
    if (!same_file(dir / compile::kCompilerName, wrapper))
      throw EnvironmentError("this installation has no masquerade directory (" + dir.string() +
                             " with neuronx-cc linked to " + wrapper.string() +
                             "): make one with neuron_cache masquerade-dir --create DIR");
  }
  std::string line = dir.string() + "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  return 0;
}

} // namespace npc::cli
