#include <npc/launcher/system.hpp>

#include <fstream>
#include <sstream>
#include <thread>
#include <unistd.h>

#include <npc/util/error.hpp>
#include <npc/util/process.hpp>
#include <npc/util/strings.hpp>

namespace npc::launcher {

unsigned core_count() {
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  unsigned hw = std::thread::hardware_concurrency();
  return static_cast<unsigned>(std::max<long>(1, online > 0 ? online : hw));
}

namespace {
std::uint64_t meminfo_bytes(const std::string& field) {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    if (!line.starts_with(field)) continue;
    std::istringstream in(line.substr(field.size()));
    std::uint64_t kib = 0;
    in >> kib;
    return kib * 1024;
  }
  return 0;
}
} // namespace

std::uint64_t available_memory() { return meminfo_bytes("MemAvailable:"); }
std::uint64_t total_memory() { return meminfo_bytes("MemTotal:"); }

std::filesystem::path sibling_program(const std::string& name) {
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto sibling = self.parent_path() / name;
    if (::access(sibling.c_str(), X_OK) == 0) return sibling;
  }
  auto found = util::find_executable(name, util::env("PATH"));
  if (!found)
    throw EnvironmentError(name + " was not found next to " + (ec ? std::string("this program") : self.string()) +
                           " nor on PATH; install it alongside neuron_parallel_compile");
  return std::filesystem::absolute(*found);
}

} // namespace npc::launcher
