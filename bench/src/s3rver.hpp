#pragma once
// A real S3 server for the S3 scenario: s3rver (installed by
// `bash tools/setup.sh`) on a free loopback port over a directory, with one
// bucket, logging one line per response so that the requests a contender
// makes can be counted from the server's side, the same way for every
// contender.
//
// The harness's `alternate` waits for every child a run leaves behind, and
// the server is one for the whole scenario, so the scenario alternates its
// contenders itself (same rotation) rather than through `alternate`.

#include <cstddef>
#include <filesystem>
#include <string>

#include <npc/storage/s3_config.hpp>
#include <npc/util/process.hpp>

#include "s3rver_process.hpp" // tests/support: starting and stopping it, shared with the tests

namespace bench {

class S3rver {
public:
  // Starts it with its data under `dir`/data and its log in `dir`/s3rver.log;
  // throws when s3rver or node is missing or it does not start.
  S3rver(const std::filesystem::path& dir, const std::string& bucket);
  ~S3rver() = default; // SIGTERM, SIGKILL past a grace period, reaped
  S3rver(const S3rver&) = delete;
  S3rver& operator=(const S3rver&) = delete;

  [[nodiscard]] std::string endpoint() const { return process_.endpoint(); } // http://127.0.0.1:PORT
  [[nodiscard]] npc::storage::S3Config config() const { return process_.config(); }
  [[nodiscard]] const std::filesystem::path& data_dir() const { return data_; }
  // Responses logged so far (waits for the log to stop growing first: node
  // writes a line after the response has gone out).
  [[nodiscard]] std::size_t responses_logged() const;

private:
  std::filesystem::path data_;
  std::filesystem::path log_;
  npc::test::S3rverProcess process_;
};

// Our environment with rclone's remote "s3bench" configured for the server
// through RCLONE_CONFIG_* variables only (run rclone with --config /dev/null).
[[nodiscard]] npc::util::Environment rclone_environment(const S3rver& server);

} // namespace bench
