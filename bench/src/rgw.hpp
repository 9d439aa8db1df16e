#pragma once
// A RADOS Gateway for the cluster scenario, started with the tests' own
// script (tests/support/rgw.sh, installed by `bash tools/setup.sh`): unlike
// s3rver it honours If-None-Match, so K hosts racing for one lock object
// meet the create-only PUT a real S3 gives them.

#include <cstddef>
#include <filesystem>
#include <string>

#include <npc/util/process.hpp>

namespace bench {

class Rgw {
public:
  // Starts it under `dir` and creates `bucket` with the gateway's own user;
  // throws, naming what is missing, when it cannot.
  Rgw(const std::filesystem::path& dir, const std::string& bucket);
  ~Rgw(); // stops it and removes `dir`
  Rgw(const Rgw&) = delete;
  Rgw& operator=(const Rgw&) = delete;

  [[nodiscard]] const std::string& endpoint() const { return endpoint_; } // http://127.0.0.1:PORT
  // `env` with the S3 variables that reach the gateway and nothing else
  // (no AWS profile, config file or instance metadata).
  void configure(npc::util::Environment& env, const std::filesystem::path& no_files_dir) const;
  // Requests the gateway has answered so far (its log's "req done" lines).
  [[nodiscard]] std::size_t requests_served() const;
  // CPU time its daemons (radosgw, ceph-osd, ceph-mon) have used so far.
  [[nodiscard]] double cpu_seconds() const;

private:
  std::filesystem::path dir_;
  std::string endpoint_, access_key_, secret_key_;
};

} // namespace bench
