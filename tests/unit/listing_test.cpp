// cache/listing: what the names of an entry's files say, one entry's
// listing and a whole cache's tree.

#include <npc/cache/listing.hpp>

#include <chrono>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace npc::cache {
namespace {

using std::chrono::seconds;

TEST(ReadListing, TellsDoneFailedDamagedAndLockedFromTheNames) {
  auto listed = read_listing({"model.hlo_module.pb", "compile_flags.json", "model.neff", "model.done"});
  EXPECT_TRUE(listed.has_graph);
  EXPECT_TRUE(listed.done);
  EXPECT_FALSE(listed.failed);
  EXPECT_FALSE(listed.done_without_neff);
  EXPECT_FALSE(listed.has_lock);
  listed = read_listing({"model.hlo_module.pb", "model.log", "model.hlo_module.pb.lock"});
  EXPECT_TRUE(listed.failed);
  EXPECT_FALSE(listed.done);
  EXPECT_TRUE(listed.has_lock);
  listed = read_listing({"model.done", "model.log"});
  EXPECT_FALSE(listed.has_graph);
  EXPECT_FALSE(listed.done);
  EXPECT_FALSE(listed.failed) << "a done marker means no cached failure";
  EXPECT_TRUE(listed.done_without_neff);
  listed = read_listing({});
  EXPECT_FALSE(listed.done || listed.failed || listed.done_without_neff || listed.has_graph || listed.has_lock);
}

// A directory or symlink at a file's name is no such file, but is listed.
TEST(NoteEntryFile, CountsOnlyRegularFilesAsTheEntrysFiles) {
  EntryInfo info;
  note_entry_file(info, "model.neff", 100, false);
  note_entry_file(info, "model.hlo_module.pb", 7);
  note_entry_file(info, "npc-something-new", 3);
  EXPECT_FALSE(info.has_neff);
  EXPECT_EQ(info.neff_bytes, 0u);
  EXPECT_TRUE(info.has_graph);
  EXPECT_EQ(info.graph_bytes, 7u);
  EXPECT_EQ(info.bytes, 10u) << "every regular file's bytes count, known or not";
}

storage::TreeFile file(std::string key, std::uint64_t size, int at) {
  return {std::move(key), size, storage::Time(seconds(1'000'000 + at))};
}

TEST(EntriesFromTree, GroupsFilesIntoEntriesWithTheirFactsAndLastUse) {
  const std::vector<storage::TreeFile> tree = {
      file(".npc/eviction/model.hlo_module.pb.lock", 1, 0),
      file("neuronxcc-1.0/MODULE_1+abcdef01/compile_flags.json", 2, 1),
      file("neuronxcc-1.0/MODULE_1+abcdef01/model.done", 0, 5),
      file("neuronxcc-1.0/MODULE_1+abcdef01/model.hlo_module.pb", 10, 1),
      file("neuronxcc-1.0/MODULE_1+abcdef01/model.hlo_module.pb.lock", 1, 9),
      file("neuronxcc-1.0/MODULE_1+abcdef01/model.neff", 100, 4),
      {"neuronxcc-1.0/MODULE_1+abcdef01/use", 10, storage::Time(seconds(1'000'007)), true},
      file("neuronxcc-1.0/MODULE_2+abcdef01/model.hlo_module.pb", 20, 2),
      file("neuronxcc-1.0/MODULE_2+abcdef01/model.log", 3, 3),
      file("neuronxcc-1.0/stray", 1, 8),
      file("notaversion/MODULE_3+abcdef01/model.neff", 5, 8),
  };
  auto entries = entries_from_tree(tree, "");
  ASSERT_EQ(entries.size(), 2u);
  const EntryInfo& done = entries[0];
  EXPECT_EQ(done.dir, "neuronxcc-1.0/MODULE_1+abcdef01");
  EXPECT_EQ(done.key.str(), "neuronxcc-1.0/MODULE_1+abcdef01");
  EXPECT_TRUE(done.has_graph && done.has_flags && done.has_neff && done.has_done);
  EXPECT_FALSE(done.has_log);
  EXPECT_EQ(done.framework_lock.state, storage::LockState::held) << "there, not yet judged";
  EXPECT_EQ(done.bytes, 123u);
  EXPECT_EQ(done.neff_bytes, 100u);
  EXPECT_EQ(done.last_used, storage::Time(seconds(1'000'007))) << "the folder's time, not the later lock";
  const EntryInfo& failed = entries[1];
  EXPECT_TRUE(failed.has_graph && failed.has_log);
  EXPECT_FALSE(failed.has_flags || failed.has_done);
  EXPECT_EQ(failed.last_used, storage::Time(seconds(1'000'003))) << "no folder time: the newest file";
  EXPECT_EQ(state_from_files(failed, false), EntryState::failed);
}

TEST(EntriesFromTree, KeysFilesOfAVersionFolderListedAlone) {
  auto entries = entries_from_tree({file("MODULE_1+abcdef01/model.hlo_module.pb", 4, 0),
                                    file("MODULE_1+abcdef01/compile_flags.json", 2, 0)},
                                   "neuronxcc-2.0");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].dir, "neuronxcc-2.0/MODULE_1+abcdef01");
  EXPECT_EQ(state_from_files(entries[0], false), EntryState::pending);
}

} // namespace
} // namespace npc::cache
