// libcurl loaded on demand (curl_loader/dlopen.cpp): it loads, once, for
// every thread; the functions it resolved work; and the programs themselves
// do not pull libcurl in at start (a cache hit never uses S3).

#include <npc/storage/curl_library.hpp>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "paths.hpp"
#include "process.hpp"

namespace npc::storage {
namespace {

TEST(CurlLibrary, LoadsOnceAndReturnsTheSameLibrary) {
  auto first = load_curl_library();
  ASSERT_TRUE(first) << first.error();
  auto second = load_curl_library();
  ASSERT_TRUE(second) << second.error();
  EXPECT_EQ(*first, *second);
  EXPECT_EQ(&curl_library(), *first);
}

TEST(CurlLibrary, EveryThreadGetsTheSameLibrary) {
  constexpr int kThreads = 8;
  std::vector<const CurlLibrary*> seen(kThreads, nullptr);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&seen, i] { seen[static_cast<std::size_t>(i)] = &curl_library(); });
  for (auto& t : threads) t.join();
  for (const auto* lib : seen) EXPECT_EQ(lib, &curl_library());
}

TEST(CurlLibrary, ResolvedFunctionsWork) {
  const CurlLibrary& curl = curl_library();
  CURL* easy = curl.easy_init();
  ASSERT_NE(easy, nullptr);
  // The variadic ones, called through their pointers.
  EXPECT_EQ(curl.easy_setopt(easy, CURLOPT_URL, "http://127.0.0.1:1/"), CURLE_OK);
  EXPECT_EQ(curl.easy_setopt(easy, CURLOPT_NOSIGNAL, 1L), CURLE_OK);
  long status = -1;
  EXPECT_EQ(curl.easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &status), CURLE_OK);
  EXPECT_EQ(status, 0); // nothing performed yet
  curl.easy_reset(easy);
  curl.easy_cleanup(easy);

  curl_slist* list = curl.slist_append(nullptr, "a: 1");
  list = curl.slist_append(list, "b: 2");
  ASSERT_NE(list, nullptr);
  ASSERT_NE(list->next, nullptr);
  EXPECT_STREQ(list->next->data, "b: 2");
  curl.slist_free_all(list);

  EXPECT_EQ(curl.getdate("Wed, 21 Oct 2015 07:28:00 GMT", nullptr), 1445412480);
  EXPECT_STREQ(curl.easy_strerror(CURLE_OK), "No error");
}

// What the dynamic loader maps when `program` starts, as ldd shows it
// (glibc's loader lists the objects and exits when this variable is set).
std::string loaded_objects(const std::string& program) {
  std::string path = program.find('/') == std::string::npos ? test::program(program).string() : program;
  auto r = test::run({path}, {.set_env = {{"LD_TRACE_LOADED_OBJECTS", "1"}}});
  EXPECT_EQ(r.exit_code, 0) << r.describe();
  return r.out;
}

TEST(CurlLibrary, ProgramsDoNotLoadLibcurlAtStart) {
  // The static wrapper has no loader to ask (program_start_test checks it
  // is static); its dynamic build, which serves S3, is asked instead.
  std::vector<std::string> programs = {"neuron_parallel_compile", "neuron_cache"};
  programs.push_back(test::wrapper_s3_build().empty() ? test::program("neuron_cc_wrapper").string()
                                                      : test::wrapper_s3_build().string());
  for (const std::string& program : programs) {
    std::string objects = loaded_objects(program);
    // The list names libc at least: an empty answer would pass for nothing.
    EXPECT_NE(objects.find("libc.so"), std::string::npos) << program << ":\n" << objects;
    EXPECT_EQ(objects.find("libcurl"), std::string::npos) << program << ":\n" << objects;
  }
}

} // namespace
} // namespace npc::storage
