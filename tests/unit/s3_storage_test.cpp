// The S3 backend of the Storage interface against a real S3 server
// (the run's RADOS Gateway): the contract local_storage_test.cpp checks for a directory,
// where it holds on S3, and what S3 changes (folders are prefixes, last use
// is a marker object, exclusivity depends on the server).

#include <npc/storage/s3.hpp>

#include <algorithm>
#include <atomic>
#include <latch>
#include <map>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "files.hpp"
#include "fake_env.hpp"
#include "s3_server.hpp"
#include "wait.hpp"

namespace npc::storage {
namespace {

using npc::test::kS3TestBucket;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr const char* kPrefix = "cache/root";

class S3StorageTest : public npc::test::S3ServerTest {
protected:
  void SetUp() override {
    S3ServerTest::SetUp();
    if (HasFatalFailure()) return;
    auto c = S3Client::create(server_.config());
    ASSERT_TRUE(c) << c.error();
    raw_ = std::move(*c);
  }

  std::unique_ptr<S3Storage> storage(std::string prefix = kPrefix) const {
    auto c = S3Client::create(server_.config());
    if (!c) throw std::runtime_error(c.error());
    return std::make_unique<S3Storage>(std::move(*c), S3Location{kS3TestBucket, std::move(prefix)});
  }

  // Every object of the bucket, by full key.
  std::vector<std::string> keys() {
    auto all = raw_->list_all(kS3TestBucket, {});
    if (!all) {
      ADD_FAILURE() << all.error();
      return {};
    }
    std::vector<std::string> out;
    for (const auto& o : all->objects) out.push_back(o.key);
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string object(const std::string& key) {
    auto got = raw_->get_object(kS3TestBucket, key, 1 << 20);
    if (!got || !*got) return "<absent>";
    return **got;
  }

  std::unique_ptr<S3Client> raw_;
};

// s3rver reports a folder in a delimited listing only when an object lies
// directly in it (its walk of the disk skips deeper folders), where AWS S3
// reports it for any object below: a folder listed in these tests holds an
// object of its own, so that they check our side against either server.
TEST_F(S3StorageTest, WriteReadStatAndListGoUnderThePrefix) {
  auto s = storage();
  ASSERT_TRUE(s->write("v1/MODULE_a+b/model.neff", "neff bytes", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("v1/MODULE_a+b/model.done", "", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("v1/npc-version", "1", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("top", "t", storage::IfPresent::replace));
  EXPECT_EQ(keys(), (std::vector<std::string>{"cache/root/top", "cache/root/v1/MODULE_a+b/model.done",
                                              "cache/root/v1/MODULE_a+b/model.neff", "cache/root/v1/npc-version"}));
  EXPECT_EQ(object("cache/root/v1/MODULE_a+b/model.neff"), "neff bytes");
  auto bytes = s->read("v1/MODULE_a+b/model.neff", 1 << 20);
  ASSERT_TRUE(bytes) << bytes.error();
  EXPECT_EQ(*bytes, "neff bytes");

  auto info = s->stat("v1/MODULE_a+b/model.neff");
  ASSERT_TRUE(info) << info.error();
  ASSERT_TRUE(info->has_value());
  EXPECT_EQ((*info)->size, 10u);
  EXPECT_FALSE((*info)->directory);
  EXPECT_LT(std::chrono::abs(std::chrono::system_clock::now() - (*info)->modified), 120s);
  for (std::string folder : {"v1/MODULE_a+b", "v1", ""}) {
    SCOPED_TRACE(folder);
    auto dir = s->stat(folder);
    ASSERT_TRUE(dir) << dir.error();
    ASSERT_TRUE(dir->has_value());
    EXPECT_TRUE((*dir)->directory);
    EXPECT_EQ((*dir)->size, 0u);
  }

  auto top = s->list("");
  ASSERT_TRUE(top) << top.error();
  EXPECT_EQ(*top, (std::vector<std::string>{"top", "v1"}));
  auto names = s->list("v1");
  ASSERT_TRUE(names) << names.error();
  EXPECT_EQ(*names, (std::vector<std::string>{"MODULE_a+b", "npc-version"}));
  auto files = s->list("v1/MODULE_a+b");
  ASSERT_TRUE(files) << files.error();
  EXPECT_EQ(*files, (std::vector<std::string>{"model.done", "model.neff"}));

  EXPECT_EQ(s->describe(), "s3://test-bucket/cache/root");
  EXPECT_EQ(s->describe("v1/x"), "s3://test-bucket/cache/root/v1/x");
}

TEST_F(S3StorageTest, AbsentThingsAreEmptyNotErrors) {
  auto s = storage();
  auto names = s->list("nothing/here");
  ASSERT_TRUE(names) << names.error();
  EXPECT_TRUE(names->empty());
  auto info = s->stat("nothing/here");
  ASSERT_TRUE(info) << info.error();
  EXPECT_FALSE(info->has_value());
  auto root = s->stat("");
  ASSERT_TRUE(root) << root.error();
  EXPECT_FALSE(root->has_value());
  EXPECT_TRUE(s->remove("nothing/here"));
  auto removed = s->remove_tree("nothing");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_FALSE(*removed);
  auto read = s->read("nothing/here", 100);
  ASSERT_FALSE(read);
  EXPECT_EQ(read.error(), "cannot read s3://test-bucket/cache/root/nothing/here: no such file");
  EXPECT_EQ(keys(), std::vector<std::string>{});
}

TEST_F(S3StorageTest, ReadRefusesMoreThanAsked) {
  auto s = storage();
  ASSERT_TRUE(s->write("big", std::string(100, 'x'), storage::IfPresent::replace));
  auto small = s->read("big", 10);
  ASSERT_FALSE(small);
  EXPECT_NE(small.error().find("s3://test-bucket/cache/root/big is larger than 10"), std::string::npos) << small.error();
  auto whole = s->read("big", 100);
  ASSERT_TRUE(whole) << whole.error();
  EXPECT_EQ(*whole, std::string(100, 'x'));
}

TEST_F(S3StorageTest, WriteAtomicReplaces) {
  auto s = storage();
  ASSERT_TRUE(s->write("e/npc-entry.json", "old", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("e/npc-entry.json", "new, longer", storage::IfPresent::replace));
  EXPECT_EQ(object("cache/root/e/npc-entry.json"), "new, longer");
  EXPECT_EQ(keys(), std::vector<std::string>{"cache/root/e/npc-entry.json"});
}

TEST_F(S3StorageTest, CreateExclusiveKeepsTheFirstContent) {
  auto s = storage();
  auto first = s->write("e/graph", "one", storage::IfPresent::keep);
  ASSERT_TRUE(first) << first.error();
  EXPECT_TRUE(*first);
  auto second = s->write("e/graph", "two", storage::IfPresent::keep);
  ASSERT_TRUE(second) << second.error();
  EXPECT_FALSE(*second);
  EXPECT_EQ(object("cache/root/e/graph"), "one");
}

// A create-only PUT is what AWS S3 makes exclusive (one creator wins, the
// others get 412), and a PUT is seen whole or not at all (s3.hpp): of
// racing creators exactly one wins, its bytes stay, and once the object
// exists every creator loses and leaves it as it is.
TEST_F(S3StorageTest, OfSixteenThreadsCreatingOneKeyExactlyOneWinsAndItsBytesStay) {
  constexpr int kThreads = 16;
  std::vector<std::unique_ptr<S3Storage>> storages;
  for (int i = 0; i < kThreads; ++i) storages.push_back(storage());
  auto content = [](int i) { return "writer " + std::to_string(i) + " " + std::string(10000 + i, static_cast<char>('a' + i)); };
  std::vector<int> outcome(kThreads, -1); // 1 won, 0 lost, 2 failed
  std::vector<std::string> errors(kThreads);
  std::latch start(kThreads);
  {
    std::vector<std::jthread> threads;
    for (int i = 0; i < kThreads; ++i) {
      threads.emplace_back([&, i] {
        start.arrive_and_wait();
        auto made = storages[i]->write("v/MODULE_x+y/model.hlo_module.pb", content(i), storage::IfPresent::keep);
        if (!made) errors[i] = made.error();
        outcome[i] = !made ? 2 : *made ? 1 : 0;
      });
    }
  }
  for (int i = 0; i < kThreads; ++i) EXPECT_EQ(errors[i], "") << "writer " << i;
  ASSERT_EQ(std::count(outcome.begin(), outcome.end(), 1), 1);
  EXPECT_EQ(std::count(outcome.begin(), outcome.end(), 0), kThreads - 1);
  const int winner = static_cast<int>(std::find(outcome.begin(), outcome.end(), 1) - outcome.begin());
  EXPECT_EQ(keys(), std::vector<std::string>{"cache/root/v/MODULE_x+y/model.hlo_module.pb"});
  std::string final_content = object("cache/root/v/MODULE_x+y/model.hlo_module.pb");
  EXPECT_EQ(final_content, content(winner));

  for (int i = 0; i < 4; ++i) {
    auto late = storages[i]->write("v/MODULE_x+y/model.hlo_module.pb", "late", storage::IfPresent::keep);
    ASSERT_TRUE(late) << late.error();
    EXPECT_FALSE(*late);
  }
  EXPECT_EQ(object("cache/root/v/MODULE_x+y/model.hlo_module.pb"), final_content);
}

TEST_F(S3StorageTest, PutFileReplacesAndConsumesTheLocalFile) {
  auto s = storage();
  ASSERT_TRUE(s->write("e/model.log", "old", storage::IfPresent::replace));
  npc::test::write_text(dir() / "log", "new");
  ASSERT_TRUE(s->write("e/model.log", storage::Body::file(dir() / "log"), storage::IfPresent::replace));
  EXPECT_EQ(object("cache/root/e/model.log"), "new");
  EXPECT_FALSE(fs::exists(dir() / "log"));
  // A missing local file fails, naming it, and places nothing.
  auto missing = s->write("e/other", storage::Body::file(dir() / "absent"), storage::IfPresent::replace);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find((dir() / "absent").string()), std::string::npos) << missing.error();
  EXPECT_EQ(keys(), std::vector<std::string>{"cache/root/e/model.log"});
}

TEST_F(S3StorageTest, PutFileIfAbsentKeepsTheExistingObjectAndRemovesTheLocalFile) {
  auto s = storage();
  npc::test::write_text(dir() / "first", "first neff");
  auto placed = s->write("e/model.neff", storage::Body::file(dir() / "first"), storage::IfPresent::keep);
  ASSERT_TRUE(placed) << placed.error();
  EXPECT_TRUE(*placed);
  EXPECT_FALSE(fs::exists(dir() / "first"));
  npc::test::write_text(dir() / "second", "second neff");
  auto again = s->write("e/model.neff", storage::Body::file(dir() / "second"), storage::IfPresent::keep);
  ASSERT_TRUE(again) << again.error();
  EXPECT_FALSE(*again);
  EXPECT_FALSE(fs::exists(dir() / "second"));
  EXPECT_EQ(object("cache/root/e/model.neff"), "first neff");
}

TEST_F(S3StorageTest, RemoveIsPerObjectAndFineWhenAbsent) {
  auto s = storage();
  ASSERT_TRUE(s->write("e/a", "x", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("e/b", "y", storage::IfPresent::replace));
  ASSERT_TRUE(s->remove("e/a"));
  ASSERT_TRUE(s->remove("e/a"));
  EXPECT_EQ(keys(), std::vector<std::string>{"cache/root/e/b"});
}

TEST_F(S3StorageTest, RemoveTreeRemovesEverythingUnderThePrefixAndOnlyThat) {
  auto s = storage();
  // More objects than one listing page (1000) holds.
  constexpr int kMany = 1005;
  for (int i = 0; i < kMany; ++i) ASSERT_TRUE(s->write("v/MODULE_1/sub/f" + std::to_string(i), "x", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("v/MODULE_1/model.neff", "neff", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("v/MODULE_1/model.done", "", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("v/MODULE_10/model.done", "sibling", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("v/MODULE_1.txt", "neighbour", storage::IfPresent::replace));
  ASSERT_TRUE(raw_->put_object(kS3TestBucket, "cache/rootless/v/MODULE_1/model.done", "outside the prefix"));

  auto sub = s->list("v/MODULE_1/sub");
  ASSERT_TRUE(sub) << sub.error();
  EXPECT_EQ(sub->size(), static_cast<std::size_t>(kMany));
  auto entry = s->list("v/MODULE_1");
  ASSERT_TRUE(entry) << entry.error();
  EXPECT_EQ(*entry, (std::vector<std::string>{"model.done", "model.neff", "sub"}));

  auto removed = s->remove_tree("v/MODULE_1");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_TRUE(*removed);
  EXPECT_EQ(keys(), (std::vector<std::string>{"cache/root/v/MODULE_1.txt", "cache/root/v/MODULE_10/model.done",
                                              "cache/rootless/v/MODULE_1/model.done"}));
  auto gone = s->stat("v/MODULE_1");
  ASSERT_TRUE(gone) << gone.error();
  EXPECT_FALSE(gone->has_value());
  auto names = s->list("v");
  ASSERT_TRUE(names) << names.error();
  EXPECT_EQ(*names, (std::vector<std::string>{"MODULE_1.txt", "MODULE_10"}));
  auto again = s->remove_tree("v/MODULE_1");
  ASSERT_TRUE(again) << again.error();
  EXPECT_FALSE(*again);
}

// S3 folders have no time and S3 cannot set an object's LastModified: a
// folder's time (a cache entry's last use) is a marker object, whose time in
// a listing (what eviction reads, cache/store.cpp) is when it was
// written; its content is the time asked for, for people reading the bucket.
TEST_F(S3StorageTest, AFolderTimeIsAMarkerObjectListedAtThatTime) {
  auto s = storage();
  ASSERT_TRUE(s->write("v/e/model.neff", "x", storage::IfPresent::replace));
  Time when = std::chrono::system_clock::from_time_t(1700000000);
  const auto before = std::chrono::system_clock::now();
  ASSERT_TRUE(s->set_folder_time("v/e", when));
  EXPECT_EQ(object("cache/root/v/e/npc-last-use"), "1700000000");
  auto listed = s->list_tree("v/e");
  ASSERT_TRUE(listed) << listed.error();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[1].key, "npc-last-use");
  EXPECT_TRUE((*listed)[1].folder_time);
  EXPECT_FALSE((*listed)[0].folder_time) << "model.neff";
  // The server's clock, in whole seconds, against ours.
  EXPECT_GE((*listed)[1].modified, std::chrono::floor<std::chrono::seconds>(before) - 5s);
  EXPECT_LE((*listed)[1].modified, std::chrono::system_clock::now() + 5s);
  ASSERT_TRUE(s->set_folder_time("v/e", std::chrono::system_clock::from_time_t(1800000000)));
  EXPECT_EQ(object("cache/root/v/e/npc-last-use"), "1800000000");
  EXPECT_EQ(keys(), (std::vector<std::string>{"cache/root/v/e/model.neff", "cache/root/v/e/npc-last-use"}));
}

TEST_F(S3StorageTest, AStorageWithoutAPrefixUsesTheBucketsTop) {
  auto s = storage("");
  ASSERT_TRUE(s->write("neuronxcc-2.0/MODULE_a+b/model.neff", "n", storage::IfPresent::replace));
  ASSERT_TRUE(s->write("neuronxcc-2.0/npc-version", "2", storage::IfPresent::replace));
  EXPECT_EQ(keys(), (std::vector<std::string>{"neuronxcc-2.0/MODULE_a+b/model.neff", "neuronxcc-2.0/npc-version"}));
  auto top = s->list("");
  ASSERT_TRUE(top) << top.error();
  EXPECT_EQ(*top, std::vector<std::string>{"neuronxcc-2.0"});
  auto root = s->stat("");
  ASSERT_TRUE(root) << root.error();
  ASSERT_TRUE(root->has_value());
  EXPECT_TRUE((*root)->directory);
  EXPECT_EQ(s->describe(), "s3://test-bucket");
  EXPECT_EQ(s->describe("neuronxcc-2.0/x"), "s3://test-bucket/neuronxcc-2.0/x");
  ASSERT_TRUE(s->set_folder_time("", std::chrono::system_clock::from_time_t(5)));
  EXPECT_EQ(object("npc-last-use"), "5");
  auto everything = s->remove_tree("");
  ASSERT_FALSE(everything);
  EXPECT_EQ(everything.error(), "refusing to remove every object of bucket test-bucket (give the storage a prefix)");
  auto removed = s->remove_tree("neuronxcc-2.0");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_TRUE(*removed);
  EXPECT_EQ(keys(), std::vector<std::string>{"npc-last-use"});
}

TEST_F(S3StorageTest, KeysWithSpacesAndPlusSigns) {
  auto s = storage("a prefix+x");
  const std::string key = "v 1/MODULE_a+b c/model file+1.neff";
  ASSERT_TRUE(s->write(key, "spaced", storage::IfPresent::replace));
  EXPECT_EQ(keys(), std::vector<std::string>{"a prefix+x/" + key});
  auto bytes = s->read(key, 100);
  ASSERT_TRUE(bytes) << bytes.error();
  EXPECT_EQ(*bytes, "spaced");
  auto names = s->list("v 1");
  ASSERT_TRUE(names) << names.error();
  EXPECT_EQ(*names, std::vector<std::string>{"MODULE_a+b c"});
  auto info = s->stat(key);
  ASSERT_TRUE(info) << info.error();
  ASSERT_TRUE(info->has_value());
  EXPECT_EQ((*info)->size, 6u);
  auto made = s->write("v 1/MODULE_a+b c/model file+1.neff", "again", storage::IfPresent::keep);
  ASSERT_TRUE(made) << made.error();
  EXPECT_FALSE(*made);
  auto removed = s->remove_tree("v 1/MODULE_a+b c");
  ASSERT_TRUE(removed) << removed.error();
  EXPECT_TRUE(*removed);
  EXPECT_EQ(keys(), std::vector<std::string>{});
}

TEST_F(S3StorageTest, OpenTakesTheUrlAndTheEnvironment) {
  std::map<std::string, std::string> vars{{"HOME", dir().string()},
                                          {"AWS_ACCESS_KEY_ID", server_.access_key()},
                                          {"AWS_SECRET_ACCESS_KEY", server_.secret_key()},
                                          {"AWS_ENDPOINT_URL_S3", server_.endpoint()},
                                          {"AWS_EC2_METADATA_DISABLED", "true"}};
  EnvLookup env = npc::test::env_lookup(vars);
  auto s = S3Storage::open("s3://test-bucket/team/cache/", env);
  ASSERT_TRUE(s) << s.error();
  EXPECT_EQ((*s)->location().prefix, "team/cache");
  EXPECT_EQ((*s)->describe(), "s3://test-bucket/team/cache");
  ASSERT_TRUE((*s)->write("k", "v", storage::IfPresent::replace));
  EXPECT_EQ(object("team/cache/k"), "v");

  auto bad = S3Storage::open("s3://Bad_Bucket/x", env);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error(), "S3 bucket name 'Bad_Bucket' in s3://Bad_Bucket/x may only hold a-z, 0-9, '.' and '-'");
  vars.erase("AWS_SECRET_ACCESS_KEY");
  env = npc::test::env_lookup(vars); // it looks in a copy
  auto no_keys = S3Storage::open("s3://test-bucket/x", env);
  ASSERT_FALSE(no_keys);
  EXPECT_EQ(no_keys.error().rfind("no AWS credentials found", 0), 0u) << no_keys.error();
}

} // namespace
} // namespace npc::storage
