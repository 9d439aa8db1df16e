#pragma once
// Two caches in directories for the tests of the remote cache: one in the
// role of the remote (written as a node of the cluster would, its storage a
// directory: the Storage contract is S3's) and this machine's mirror.

#include <memory>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/cache/store.hpp>
#include <npc/storage/local.hpp>

#include "files.hpp"
#include "temp_dir.hpp"

namespace npc::test {

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
    test::write_text(dir() / "result", content);
    auto taken = entry.lock(std::chrono::milliseconds(0));
    ASSERT_TRUE(taken && std::holds_alternative<storage::Lock>(*taken));
    cache::AttemptRecord record;
    record.attempt = 1;
    record.outcome = success ? "success" : "failed";
    record.exit = success ? "exit code 0" : "exit code 70";
    ASSERT_TRUE((success ? entry.publish_success(dir() / "result", record)
                         : entry.publish_failure(dir() / "result", record))
                    .ok());
  }

  std::optional<cache::Cache> origin;
  std::optional<cache::Cache> mirror;
};

} // namespace npc::test
