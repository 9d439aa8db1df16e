#include "s3rver.hpp"

#include <regex>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

#include "harness.hpp"

namespace bench {

S3rver::S3rver(const fs::path& dir, const std::string& bucket) : data_(dir / "data"), log_(dir / "s3rver.log") {
  npc::test::S3rverOptions options;
  options.data_dir = data_;
  options.bucket = bucket;
  options.out_file = log_;
  options.err_file = log_;
  options.log_responses = true; // counted by responses_logged()
  npc::Status started = process_.start(options);
  if (!started) throw std::runtime_error(started.error());
}

std::size_t S3rver::responses_logged() const {
  std::error_code ec;
  std::uintmax_t size = fs::file_size(log_, ec);
  for (int i = 0; i < 50; ++i) { // up to 1 s for the log to settle
    ::usleep(20000);
    std::uintmax_t now = fs::file_size(log_, ec);
    if (now == size && i >= 5) break;
    size = now;
  }
  // koa-logger's response lines end "<status> <time> <size>", e.g.
  // "/b/k.neff 200 169ms 0b" or "... 200 2,315ms 200MB" (the time grouped
  // with commas, in seconds past 10 s); s3rver's other lines are sentences.
  static const std::regex response(R"( [1-5][0-9][0-9] [0-9.,]+m?s [^ ]+$)");
  std::istringstream lines(read_text(log_));
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line);)
    if (std::regex_search(line, response)) ++n;
  return n;
}

npc::util::Environment rclone_environment(const S3rver& server) {
  npc::util::Environment env = npc::util::Environment::current();
  // Set for AWS's tools on some machines; rclone then fails over plain http
  // ("unable to load custom CA bundle").
  env.unset("AWS_CA_BUNDLE");
  env.set("RCLONE_CONFIG_S3BENCH_TYPE", "s3");
  env.set("RCLONE_CONFIG_S3BENCH_PROVIDER", "Other");
  env.set("RCLONE_CONFIG_S3BENCH_ACCESS_KEY_ID", "S3RVER");
  env.set("RCLONE_CONFIG_S3BENCH_SECRET_ACCESS_KEY", "S3RVER");
  env.set("RCLONE_CONFIG_S3BENCH_ENDPOINT", server.endpoint());
  env.set("RCLONE_CONFIG_S3BENCH_REGION", "us-east-1");
  env.set("RCLONE_CONFIG_S3BENCH_FORCE_PATH_STYLE", "true");
  return env;
}

} // namespace bench
