// Many files to S3 and back with several clients at once, against a real
// S3 server (the run's RADOS Gateway): every object arrives with exactly its bytes, and the
// first failure is reported and stops the rest.

#include <npc/storage/s3_transfer.hpp>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/util/sha256.hpp>

#include "files.hpp"
#include "s3_server.hpp"

namespace npc::storage {
namespace {

using npc::test::kS3TestBucket;
namespace fs = std::filesystem;

// Distinct bytes per file (so a mixed-up key would show), some sizes above
// libcurl's buffers so a file takes many reads.
std::string content_of(int i) {
  std::string bytes;
  std::size_t size = (i % 3 == 0) ? (700 * 1024 + static_cast<std::size_t>(i)) : static_cast<std::size_t>(17 * i + 1);
  bytes.reserve(size);
  for (std::size_t n = 0; n < size; ++n) bytes.push_back(static_cast<char>((n * 31 + static_cast<std::size_t>(i) * 7) % 251));
  return bytes;
}

class S3TransferTest : public npc::test::S3ServerTest {
protected:
  // 12 local files under dir/up, to keys t/<i>.neff.
  std::vector<S3TransferFile> make_files() {
    std::vector<S3TransferFile> files;
    for (int i = 0; i < 12; ++i) {
      fs::path local = dir() / "up" / ("f" + std::to_string(i) + ".neff");
      npc::test::write_text(local, content_of(i));
      files.push_back({local, "t/" + std::to_string(i) + ".neff"});
    }
    return files;
  }
};

TEST_F(S3TransferTest, UploadsEveryFileWithItsExactBytes) {
  auto files = make_files();
  std::uint64_t expected_bytes = 0;
  for (int i = 0; i < 12; ++i) expected_bytes += content_of(i).size();
  auto totals = upload_files(server_.config(), kS3TestBucket, files, {.concurrency = 4});
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_EQ(totals->files, 12u);
  EXPECT_EQ(totals->bytes, expected_bytes);
  EXPECT_EQ(totals->requests, 12u); // one PUT a file, nothing retried

  auto client = S3Client::create(server_.config());
  ASSERT_TRUE(client) << client.error();
  auto listed = (*client)->list_all(kS3TestBucket, {.prefix = "t/"});
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_EQ(listed->objects.size(), 12u);
  for (int i = 0; i < 12; ++i) {
    auto got = (*client)->get_object(kS3TestBucket, files[static_cast<std::size_t>(i)].key, 1 << 20);
    ASSERT_TRUE(got) << got.error();
    ASSERT_TRUE(got->has_value()) << files[static_cast<std::size_t>(i)].key;
    EXPECT_EQ(util::sha256_hex(**got), util::sha256_hex(content_of(i))) << files[static_cast<std::size_t>(i)].key;
    EXPECT_EQ((*got)->size(), content_of(i).size());
  }
}

TEST_F(S3TransferTest, DownloadsEveryObjectToItsFile) {
  auto files = make_files();
  ASSERT_TRUE(upload_files(server_.config(), kS3TestBucket, files, {.concurrency = 3}));
  std::vector<S3TransferFile> back;
  for (const auto& f : files) back.push_back({dir() / "down" / f.local.filename(), f.key});
  fs::create_directories(dir() / "down");
  auto totals = download_files(server_.config(), kS3TestBucket, back, {.concurrency = 4});
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_EQ(totals->files, 12u);
  EXPECT_EQ(totals->requests, 12u);
  for (int i = 0; i < 12; ++i) {
    const auto& f = back[static_cast<std::size_t>(i)];
    EXPECT_EQ(npc::test::file_sha256(f.local), util::sha256_hex(content_of(i))) << f.local;
  }
  EXPECT_EQ(npc::test::names_in(dir() / "down").size(), 12u); // no temp files left behind
}

TEST_F(S3TransferTest, OneClientIsEnough) {
  auto files = make_files();
  auto totals = upload_files(server_.config(), kS3TestBucket, files, {.concurrency = 1});
  ASSERT_TRUE(totals) << totals.error();
  EXPECT_EQ(totals->files, 12u);
}

TEST_F(S3TransferTest, AMissingObjectFailsTheDownloadAndNamesIt) {
  auto files = make_files();
  ASSERT_TRUE(upload_files(server_.config(), kS3TestBucket, files, {.concurrency = 2}));
  fs::create_directories(dir() / "down");
  std::vector<S3TransferFile> back{{dir() / "down" / "a.neff", files[0].key},
                                   {dir() / "down" / "missing.neff", "t/missing.neff"}};
  auto totals = download_files(server_.config(), kS3TestBucket, back, {.concurrency = 1});
  ASSERT_FALSE(totals);
  EXPECT_EQ(totals.error(), "cannot download s3://" + std::string(kS3TestBucket) + "/t/missing.neff to " +
                                (dir() / "down" / "missing.neff").string() + ": no such object");
  EXPECT_FALSE(fs::exists(dir() / "down" / "missing.neff"));
}

TEST_F(S3TransferTest, AMissingLocalFileFailsTheUploadAndStopsTheRest) {
  auto files = make_files();
  files.insert(files.begin(), S3TransferFile{dir() / "up" / "absent.neff", "t/absent.neff"});
  auto totals = upload_files(server_.config(), kS3TestBucket, files, {.concurrency = 1});
  ASSERT_FALSE(totals);
  EXPECT_NE(totals.error().find((dir() / "up" / "absent.neff").string()), std::string::npos) << totals.error();
  // One client, the bad file first: nothing after it started.
  auto client = S3Client::create(server_.config());
  ASSERT_TRUE(client) << client.error();
  auto listed = (*client)->list_all(kS3TestBucket, {.prefix = "t/"});
  ASSERT_TRUE(listed) << listed.error();
  EXPECT_TRUE(listed->objects.empty());
}

TEST_F(S3TransferTest, RejectsZeroConcurrency) {
  auto totals = upload_files(server_.config(), kS3TestBucket, make_files(), {.concurrency = 0});
  ASSERT_FALSE(totals);
  EXPECT_EQ(totals.error(), "S3 transfer concurrency must be at least 1");
}

} // namespace
} // namespace npc::storage
