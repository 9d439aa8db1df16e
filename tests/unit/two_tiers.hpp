#pragma once
// Two caches in directories for the tests of the remote cache: one in the
// role of the remote (written as a node of the cluster would, its storage a
// directory: the Storage contract is S3's) and this machine's mirror.

#include <algorithm>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/storage/s3.hpp>
#include <npc/cache/store.hpp>
#include <npc/storage/local.hpp>
#include <npc/storage/s3.hpp>
#include <npc/storage/s3_client.hpp>

#include "files.hpp"
#include "s3_server.hpp"
#include "temp_dir.hpp"

namespace npc::test {

// Publishes `content` (written to `scratch` first) as the entry's NEFF
// (success) or log (failure), as our tools do, with its record, under the
// entry's lock; the entry's graph must be stored.
inline void publish_test_result(const cache::Entry& entry, bool success, const std::string& content,
                                const fs::path& scratch) {
  test::write_text(scratch, content);
  auto taken = entry.lock(std::chrono::milliseconds(0));
  ASSERT_TRUE(taken && std::holds_alternative<storage::Lock>(*taken));
  cache::AttemptRecord record;
  record.attempt = 1;
  record.outcome = success ? "success" : "failed";
  record.exit = success ? "exit code 0" : "exit code 70";
  ASSERT_TRUE((success ? entry.publish_success(scratch, record) : entry.publish_failure(scratch, record)).ok());
}

class TwoTiersTest : public TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    origin.emplace(dir() / "remote");
    mirror.emplace(dir() / "mirror");
    ASSERT_TRUE(origin->ensure_root().ok());
    ASSERT_TRUE(mirror->ensure_root().ok());
  }
  // A storage of the remote; each call a new one, as a connection.
  std::shared_ptr<storage::Storage> remote_storage() const {
    return std::make_shared<storage::LocalStorage>(dir() / "remote", dir() / "remote-trash");
  }
  // Publishes `content` as the entry's NEFF (success) or log (failure), as
  // our tools do, with its record; the entry's graph must be stored.
  void publish_result(const cache::Entry& entry, bool success, const std::string& content) {
    publish_test_result(entry, success, content, dir() / "result");
  }

  std::optional<cache::Cache> origin;
  std::optional<cache::Cache> mirror;
};

// A mirror in a directory and a shared tier in either backend, for tests
// that hold for both: a directory, or a real S3 server (the run's RADOS
// Gateway, which verifies signatures and honours conditional writes). What
// the shared tier holds is written and looked at through its storage, as
// another host would.
enum class SharedBackend { directory, s3 };

inline void PrintTo(SharedBackend backend, std::ostream* out) {
  *out << (backend == SharedBackend::s3 ? "s3" : "directory");
}

inline std::string shared_backend_name(const ::testing::TestParamInfo<SharedBackend>& info) {
  return info.param == SharedBackend::s3 ? "s3" : "directory";
}

class MirrorAndSharedTest : public TempDirTest, public ::testing::WithParamInterface<SharedBackend> {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    if (HasFatalFailure()) return;
    if (GetParam() == SharedBackend::s3) {
      ASSERT_NO_FATAL_FAILURE(server_.start(dir() / "s3"));
    }
    origin.emplace(std::vector<std::shared_ptr<storage::Storage>>{shared_storage()});
    mirror.emplace(dir() / "mirror");
    ASSERT_TRUE(mirror->ensure_root().ok());
  }
  void TearDown() override {
    server_.shut_down();
    TempDirTest::TearDown();
  }

  // A connection to the shared tier; each call a new one.
  std::shared_ptr<storage::Storage> shared_storage() const {
    if (GetParam() == SharedBackend::directory)
      return std::make_shared<storage::LocalStorage>(dir() / "shared", dir() / "shared-trash");
    auto client = storage::S3Client::create(server_.config());
    if (!client) throw std::runtime_error(client.error());
    return std::make_shared<storage::S3Storage>(std::move(*client), storage::S3Location{kS3TestBucket, "team/cache"});
  }

  // Publishes `content` as the entry's NEFF (success) or log (failure), as
  // our tools do, with its record; the entry's graph must be stored.
  void publish_result(const cache::Entry& entry, bool success, const std::string& content) {
    publish_test_result(entry, success, content, dir() / "result");
  }

  // The files of a folder of the shared tier, by name, sorted; without the
  // record of the folder's time (S3 keeps an entry's last use in one,
  // written when a result there is used; a directory keeps it in the
  // folder's own time).
  std::vector<std::string> shared_names(const fs::path& folder) const {
    auto storage = shared_storage();
    auto names = storage->list(folder.generic_string());
    EXPECT_TRUE(names) << names.error();
    if (!names) return {};
    std::erase(*names, std::string(storage::kS3FolderTimeFile));
    std::sort(names->begin(), names->end());
    return *names;
  }
  std::string shared_text(const fs::path& key) const {
    auto text = shared_storage()->read(key.generic_string(), 1 << 20);
    EXPECT_TRUE(text) << text.error();
    return text ? *text : std::string();
  }
  void write_shared(const fs::path& key, const std::string& text) const {
    auto written = shared_storage()->write(key.generic_string(), text, storage::IfPresent::replace);
    ASSERT_TRUE(written.ok()) << written.error();
  }

  S3Server server_;
  std::optional<cache::Cache> origin; // the shared tier, as another host writes it
  std::optional<cache::Cache> mirror;
};

} // namespace npc::test
