#include "s3_server.hpp"

#include <gtest/gtest.h>

namespace npc::test {

void S3Server::start(const fs::path& dir, S3Backend backend) {
  backend_ = backend;
  if (backend == S3Backend::rgw) {
    Status created = tenant_.create(kS3TestBucket);
    ASSERT_TRUE(created) << created.error();
    return;
  }
  S3rverOptions options;
  options.data_dir = dir / "data";
  options.bucket = kS3TestBucket;
  options.out_file = dir / "s3rver.out";
  options.err_file = dir / "s3rver.err";
  options.node = "/usr/bin/node";
  Status started = process_.start(options);
  ASSERT_TRUE(started) << started.error();
}

void S3Server::stop() {
  if (backend_ == S3Backend::rgw) {
    ADD_FAILURE() << "the RADOS Gateway is the whole test run's and cannot be stopped: a test that takes its "
                     "server away starts it with S3Backend::s3rver";
    return;
  }
  process_.stop();
}

void S3Server::shut_down() {
  if (backend_ == S3Backend::s3rver) process_.stop();
}

int S3Server::port() const { return backend_ == S3Backend::rgw ? tenant_.port() : process_.port(); }

std::string S3Server::endpoint() const {
  return backend_ == S3Backend::rgw ? tenant_.endpoint() : process_.endpoint();
}

std::string S3Server::access_key() const {
  return backend_ == S3Backend::rgw ? tenant_.access_key() : kS3rverAccessKey;
}

std::string S3Server::secret_key() const {
  return backend_ == S3Backend::rgw ? tenant_.secret_key() : kS3rverSecretKey;
}

storage::S3Config S3Server::config() const {
  return backend_ == S3Backend::rgw ? tenant_.config() : process_.config();
}

void S3ServerTest::SetUp() {
  TempDirTest::SetUp();
  ASSERT_NO_FATAL_FAILURE(server_.start(dir(), backend()));
}

void S3ServerTest::TearDown() {
  server_.shut_down();
  TempDirTest::TearDown();
}

} // namespace npc::test
