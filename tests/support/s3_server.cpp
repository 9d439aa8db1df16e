#include "s3_server.hpp"

#include <gtest/gtest.h>

namespace npc::test {

void S3Server::start(const fs::path& dir) {
  S3rverOptions options;
  options.data_dir = dir / "data";
  options.bucket = kS3TestBucket;
  options.out_file = dir / "s3rver.out";
  options.err_file = dir / "s3rver.err";
  options.node = "/usr/bin/node";
  Status started = process_.start(options);
  ASSERT_TRUE(started) << started.error();
}

void S3ServerTest::SetUp() {
  TempDirTest::SetUp();
  ASSERT_NO_FATAL_FAILURE(server_.start(dir()));
}

void S3ServerTest::TearDown() {
  server_.stop();
  TempDirTest::TearDown();
}

} // namespace npc::test
