// cache/publish: the order in which an entry's result is written, on any
// storage. A storage that records every change shows the order; the files
// left show the outcome.

#include <npc/cache/publish.hpp>

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/cache/entry_meta.hpp>
#include <npc/storage/local.hpp>

#include "forwarding_storage.hpp"
#include "files.hpp"
#include "test_support.hpp"

namespace npc::cache {
namespace {

namespace fs = std::filesystem;
using storage::Time;

const std::string kPublishedEntry = "neuronxcc-1.0/MODULE_1+abcdef01";

// A directory storage that records each change as "<what> <file>".
class RecordingStorage final : public test::ForwardingStorage {
public:
  explicit RecordingStorage(const fs::path& root)
      : ForwardingStorage(std::make_shared<storage::LocalStorage>(root, root.parent_path() / "trash")) {}
  std::vector<std::string> changes;

  Result<bool> write(std::string_view key, const storage::Body& body, storage::IfPresent if_present) override {
    const bool keep = if_present == storage::IfPresent::keep;
    if (body.file() != nullptr) note(keep ? "put-if-absent" : "put", key);
    else note(keep ? "create" : "write", key);
    return ForwardingStorage::write(key, body, if_present);
  }
  Status remove(std::string_view key) override {
    note("remove", key);
    return ForwardingStorage::remove(key);
  }
  Result<bool> change_if_unchanged(std::string_view key, const storage::Seen& seen,
                                   std::optional<std::string_view> replacement) override {
    note(replacement ? "replace-if-unchanged" : "remove-if-unchanged", key);
    return ForwardingStorage::change_if_unchanged(key, seen, replacement);
  }
  Result<bool> remove_tree(std::string_view dir) override {
    changes.push_back("remove-tree " + std::string(dir));
    return ForwardingStorage::remove_tree(dir);
  }

private:
  void note(std::string_view what, std::string_view key) {
    changes.push_back(std::string(what) + " " + std::string(key.substr(key.rfind('/') + 1)));
  }
};

class PublishTest : public test::TempDirTest {
protected:
  void SetUp() override {
    TempDirTest::SetUp();
    storage = std::make_unique<RecordingStorage>(dir() / "cache");
    fs::create_directories(dir() / "in");
  }
  fs::path file(const std::string& name, const std::string& text) {
    fs::path path = dir() / "in" / name;
    test::write_text(path, text);
    return path;
  }
  fs::path entry() const { return dir() / "cache" / kPublishedEntry; }
  std::unique_ptr<RecordingStorage> storage;
};

TEST_F(PublishTest, ASuccessWritesTheDoneMarkerLastAndClearsEarlierLogs) {
  test::write_text(entry() / "model.log", "an earlier failure");
  test::write_text(entry() / "npc-killed.log", "an earlier kill");
  EntryResult result{.graph = file("g", "HloModule g"), .flags = file("f", "[]"), .neff = file("n", "NEFF"),
                     .record = std::string("{}")};
  ASSERT_TRUE(publish_result(*storage, kPublishedEntry, result));
  EXPECT_EQ(storage->changes,
            (std::vector<std::string>{"put-if-absent compile_flags.json", "put-if-absent model.hlo_module.pb",
                                      "remove model.done", "put model.neff", "write npc-entry.json",
                                      "write model.done", "remove model.log", "remove npc-killed.log"}));
  EXPECT_EQ(test::names_in(entry()), (std::vector<std::string>{"compile_flags.json", "model.done",
                                                               "model.hlo_module.pb", "model.neff", "npc-entry.json"}));
  EXPECT_EQ(test::read_text(entry() / "model.neff"), "NEFF");
  EXPECT_FALSE(fs::exists(dir() / "in" / "n")) << "the NEFF is moved in, not copied";
}

TEST_F(PublishTest, AFailureWritesItsRecordBeforeItsLogAndKeepsTheFirstGraph) {
  test::write_text(entry() / "model.hlo_module.pb", "HloModule first");
  EntryResult result{.graph = file("g", "HloModule second"), .log = file("l", "error: x"),
                     .record = std::string("{}")};
  ASSERT_TRUE(publish_result(*storage, kPublishedEntry, result));
  EXPECT_EQ(storage->changes, (std::vector<std::string>{"put-if-absent model.hlo_module.pb",
                                                        "write npc-entry.json", "put model.log"}));
  EXPECT_EQ(test::read_text(entry() / "model.hlo_module.pb"), "HloModule first") << "first writer wins";
  EXPECT_EQ(test::read_text(entry() / "model.log"), "error: x");
}

// What the caller's listing showed absent costs no request.
TEST_F(PublishTest, WhatTheEntryCannotHoldIsNotRemoved) {
  EntryResult result{.neff = file("n", "NEFF")};
  ASSERT_TRUE(publish_result(*storage, kPublishedEntry, result, {.done = false, .log = false, .killed_log = false}));
  EXPECT_EQ(storage->changes, (std::vector<std::string>{"put model.neff", "write model.done"}));
}

TEST_F(PublishTest, ADemotionTakesTheDoneMarkerFirstAndKeepsTheHistory) {
  EntryMeta record;
  record.neff_sha256 = std::string(64, 'a');
  record.neff_bytes = 4;
  record.attempts.push_back(AttemptRecord{.outcome = "success", .wall_seconds = 2.5});
  ASSERT_TRUE(publish_result(*storage, kPublishedEntry,
                             {.graph = file("g", "HloModule g"), .flags = file("f", "[]"), .neff = file("n", "NEFF"),
                              .record = serialize_entry_meta(record)}));
  storage->changes.clear();
  ASSERT_TRUE(demote_result(*storage, kPublishedEntry));
  EXPECT_EQ(storage->changes,
            (std::vector<std::string>{"remove model.done", "remove model.neff", "write npc-entry.json"}));
  EXPECT_EQ(test::names_in(entry()),
            (std::vector<std::string>{"compile_flags.json", "model.hlo_module.pb", "npc-entry.json"}));
  auto kept = parse_entry_meta(test::read_text(entry() / "npc-entry.json"));
  ASSERT_TRUE(kept) << kept.error();
  EXPECT_FALSE(kept->neff_sha256.has_value());
  EXPECT_FALSE(kept->neff_bytes.has_value());
  ASSERT_EQ(kept->attempts.size(), 1u);
  EXPECT_EQ(kept->attempts[0].outcome, "success");
}

// Another tool's entry has no record, and a demotion makes none; a corrupt
// one goes.
TEST_F(PublishTest, ADemotionWritesNoRecordWhereThereWasNoneAndDropsACorruptOne) {
  test::write_text(entry() / "model.neff", "NEFF");
  test::write_text(entry() / "model.done", "");
  ASSERT_TRUE(demote_result(*storage, kPublishedEntry));
  EXPECT_EQ(test::names_in(entry()), std::vector<std::string>{});
  test::write_text(entry() / "model.done", "");
  test::write_text(entry() / "npc-entry.json", "{not json");
  ASSERT_TRUE(demote_result(*storage, kPublishedEntry));
  EXPECT_EQ(test::names_in(entry()), std::vector<std::string>{});
}

// Where a folder cannot vanish at once (S3), a reader meanwhile then sees an
// entry that is not done, never a done one without its NEFF.
TEST_F(PublishTest, ARemovalTakesTheDoneMarkerFirst) {
  test::write_text(entry() / "model.done", "");
  test::write_text(entry() / "model.neff", "NEFF");
  auto removed = remove_entry(*storage, kPublishedEntry);
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_TRUE(*removed);
  EXPECT_EQ(storage->changes, (std::vector<std::string>{"remove model.done", "remove-tree " + std::string(kPublishedEntry)}));
  EXPECT_FALSE(fs::exists(entry()));
}

} // namespace
} // namespace npc::cache
