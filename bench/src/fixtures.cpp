#include "fixtures.hpp"

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>

#include <npc/util/sha256.hpp>

namespace bench {

namespace {

// SHA-256 of the empty flag list's canonical encoding (""): the flags hash of
// an entry compiled with no flags.
constexpr const char* kNoFlagsHash = "e3b0c442";

void write_small_file(const fs::path& path, std::string_view data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("cannot create " + path.string() + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(errno));
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
}

std::string bulk_graph(const BulkSpec& spec, std::size_t i) {
  std::string text = "HloModule " + spec.tag + "_" + std::to_string(i) +
                     ", entry_computation_layout={(f32[64,64]{1,0})->f32[64,64]{1,0}}\n\n"
                     "ENTRY %main (p0: f32[64,64]) -> f32[64,64] {\n  %p0 = f32[64,64]{1,0} parameter(0)\n";
  std::size_t line = 0;
  std::string previous = "%p0";
  while (text.size() + 64 < spec.graph_bytes) {
    std::string name = "%v" + std::to_string(++line);
    text += "  " + name + " = f32[64,64]{1,0} add(" + previous + ", %p0)\n";
    previous = name;
  }
  text += "  ROOT %out = f32[64,64]{1,0} copy(" + previous + ")\n}\n";
  return text;
}

std::string bulk_neff(const std::string& graph_sha, std::uint64_t bytes) {
  std::string neff = "STANDIN-NEFF 1\ncompiler-version: 2.14.213.0+standin\ngraph-sha256: " + graph_sha +
                     "\nflags: \ntarget: trn1\nend-header\n";
  std::string block = graph_sha;
  while (neff.size() < bytes) neff += block;
  neff.resize(bytes);
  return neff;
}

} // namespace

void extract_into_cache(const Context& context, const Workload& workload, const fs::path& graphs_dir,
                        const fs::path& cache_dir, const fs::path& log) {
  Environment env = clean_environment(context.programs, cache_dir);
  env.set("NEURON_EXTRACT_GRAPHS_ONLY", "1");
  fs::path placeholder_dir = cache_dir / "placeholders";
  make_dirs(placeholder_dir);
  for (const auto& g : workload.graphs) {
    RunSpec spec{{context.programs.wrapper.string(), "compile", "--graph", (graphs_dir / g.name).string(),
                  "--output", (placeholder_dir / (g.name + ".neff")).string()},
                 env, log, std::nullopt};
    std::ignore = run_checked(spec, "extracting " + g.name);
  }
  wipe(placeholder_dir);
}

void make_pending_again(const fs::path& cache_dir) {
  fs::path root = cache_root(cache_dir);
  for (const auto& version : fs::directory_iterator(root)) {
    if (!version.is_directory() || !version.path().filename().string().starts_with("neuronxcc-")) continue;
    for (const auto& entry : fs::directory_iterator(version.path())) {
      if (!entry.is_directory()) continue;
      for (const char* name : {"model.neff", "model.done", "model.log"}) fs::remove(entry.path() / name);
    }
  }
}

std::size_t count_done(const fs::path& cache_dir) {
  std::size_t done = 0;
  fs::path root = cache_root(cache_dir);
  std::error_code ec;
  for (const auto& version : fs::directory_iterator(root, ec)) {
    if (!version.is_directory() || !version.path().filename().string().starts_with("neuronxcc-")) continue;
    for (const auto& entry : fs::directory_iterator(version.path()))
      if (fs::exists(entry.path() / "model.done")) ++done;
  }
  return done;
}

double bulk_age_days(std::size_t i) { return 31.0 + static_cast<double>((i * 7919) % 3700) / 10.0; }

fs::path bulk_entry_dir(const fs::path& cache_dir, const BulkSpec& spec, std::size_t i) {
  std::string sha = npc::util::sha256_hex(bulk_graph(spec, i));
  return cache_root(cache_dir) / kStandinVersionDir / ("MODULE_" + sha.substr(0, 20) + "+" + kNoFlagsHash);
}

std::uint64_t write_bulk_entries(const fs::path& cache_dir, const BulkSpec& spec) {
  fs::path version_dir = cache_root(cache_dir) / kStandinVersionDir;
  make_dirs(version_dir);
  std::uint64_t total = 0;
  std::time_t now = std::time(nullptr);
  for (std::size_t i = spec.first; i < spec.first + spec.count; ++i) {
    std::string graph = bulk_graph(spec, i);
    std::string sha = npc::util::sha256_hex(graph);
    fs::path dir = version_dir / ("MODULE_" + sha.substr(0, 20) + "+" + kNoFlagsHash);
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
      throw std::runtime_error("cannot create " + dir.string() + ": " + std::strerror(errno));
    write_small_file(dir / "model.hlo_module.pb", graph);
    write_small_file(dir / "compile_flags.json", "[]\n");
    total += graph.size() + 3;
    std::time_t last_use = now - static_cast<std::time_t>(bulk_age_days(i) * 86400);
    nlohmann::json meta = {{"format", 1}, {"graph_bytes", graph.size()}, {"attempts", nlohmann::json::array()}};
    if (spec.done) {
      std::string neff = bulk_neff(sha, spec.neff_bytes);
      write_small_file(dir / "model.neff", neff);
      write_small_file(dir / "model.done", "");
      meta["neff"] = {{"sha256", npc::util::sha256_hex(neff)}, {"bytes", neff.size()}};
      // A plausible history: cost and memory grow with the graph.
      meta["attempts"].push_back({{"attempt", 1},
                                  {"outcome", "success"},
                                  {"exit", "exit code 0"},
                                  {"exit_code", 0},
                                  {"signal", ""},
                                  {"wall_seconds", 1.0 + static_cast<double>(i % 97)},
                                  {"peak_rss_bytes", (64 + i % 512) * 1024 * 1024},
                                  {"started_unix", last_use}});
      std::string meta_text = meta.dump(1) + "\n";
      write_small_file(dir / "npc-entry.json", meta_text);
      total += neff.size() + meta_text.size();
    }
    struct timespec times[2];
    times[0].tv_sec = times[1].tv_sec = last_use;
    times[0].tv_nsec = times[1].tv_nsec = 0;
    // Last use is the later of the directory's mtime and the NEFF's atime
    // (the framework's reads): both are set, the NEFF first (setting it
    // does not touch the directory).
    if (spec.done && ::utimensat(AT_FDCWD, (dir / "model.neff").c_str(), times, 0) != 0)
      throw std::runtime_error("cannot set the times of " + (dir / "model.neff").string() + ": " + std::strerror(errno));
    if (::utimensat(AT_FDCWD, dir.c_str(), times, 0) != 0)
      throw std::runtime_error("cannot set the mtime of " + dir.string() + ": " + std::strerror(errno));
  }
  return total;
}

} // namespace bench
