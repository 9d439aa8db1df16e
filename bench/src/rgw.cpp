#include "rgw.hpp"

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include <npc/util/fs.hpp>
#include <npc/util/strings.hpp>

#include "harness.hpp"

namespace bench {

namespace {

fs::path rgw_script() { return fs::path(NPC_BENCH_SOURCE_DIR) / "tests" / "support" / "rgw.sh"; }

std::string read_trimmed(const fs::path& path) {
  auto text = npc::util::read_file(path);
  if (!text) throw std::runtime_error("the RADOS Gateway left no " + path.string());
  return std::string(npc::util::trim(*text));
}

} // namespace

Rgw::Rgw(const fs::path& dir, const std::string& bucket) : dir_(dir) {
  Environment env = Environment::current();
  fs::path log = dir.parent_path() / (dir.filename().string() + "-start.log");
  Timed started = run_timed({{"bash", rgw_script().string(), "start", dir.string()}, env, log, std::nullopt});
  if (!started.status.success())
    throw std::runtime_error("the RADOS Gateway did not start (" + started.status.describe() + "): see " +
                             log.string() + "; `bash tools/setup.sh` installs it, and it needs root");
  endpoint_ = read_trimmed(dir / "endpoint");
  access_key_ = read_trimmed(dir / "access_key");
  secret_key_ = read_trimmed(dir / "secret_key");
  // A signed PUT of the bucket with curl's own SigV4 (as tests/support does:
  // Debian 12's curl needs the payload-hash header given).
  Timed made = run_timed({{"curl", "--silent", "--show-error", "--fail-with-body", "--max-time", "20", "--aws-sigv4",
                           "aws:amz:us-east-1:s3", "--user", access_key_ + ":" + secret_key_, "--header",
                           "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--request", "PUT", endpoint_ + "/" + bucket},
                          env, log, std::nullopt});
  if (!made.status.success())
    throw std::runtime_error("the RADOS Gateway at " + endpoint_ + " did not create bucket " + bucket + ": see " +
                             log.string());
}

Rgw::~Rgw() {
  std::ignore = run_timed({{"bash", rgw_script().string(), "stop", dir_.string()}, Environment::current(),
                           "/dev/null", std::nullopt});
}

void Rgw::configure(Environment& env, const fs::path& no_files_dir) const {
  use_s3_endpoint(env, endpoint_, access_key_, secret_key_, no_files_dir);
}

std::size_t Rgw::requests_served() const {
  std::ifstream log(dir_ / "log" / "client.rgw.test.log");
  std::size_t n = 0;
  for (std::string line; std::getline(log, line);)
    if (line.find("====== req done") != std::string::npos) ++n;
  return n;
}

double Rgw::cpu_seconds() const {
  double total = 0;
  for (const char* daemon : {"radosgw", "ceph-osd", "ceph-mon"}) {
    std::string pid = read_text(dir_ / "run" / (std::string(daemon) + ".pid"));
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    // Fields 14 and 15 of /proc/<pid>/stat (utime, stime), after the
    // parenthesised command name.
    std::string stat = read_text(fs::path("/proc") / pid / "stat");
    auto close = stat.rfind(')');
    if (pid.empty() || close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 2));
    std::string field;
    double ticks = 0;
    for (int i = 3; i <= 15 && fields >> field; ++i)
      if (i >= 14) ticks += std::stod(field);
    total += ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }
  return total;
}

} // namespace bench
