#pragma once
// What every test suite shares (the library npc_test_support), one header
// per job:
//   paths.hpp       where the programs under test are
//   files.hpp       reading and writing small files
//   process.hpp     running programs; the process table from /proc
//   wait.hpp        waiting for a condition with a deadline
//   temp_dir.hpp    a temp directory per test, kept when it fails
//   cache_test.hpp  a cache and the stand-in compiler set up for our programs
// Including this header includes them all. The network ones are included
// where used:
//   s3_server.hpp      a real S3 server for a test: the run's RADOS Gateway,
//                      or an s3rver of its own
//   rgw_tenant.hpp     a tenant of the test's own on the run's gateway
//                      (started by rgw.sh, ctest's fixture "rgw")
//   refused_port.hpp   a port that refuses connections, as a stopped server's
//   fault_proxy.hpp    a proxy in front of it that throttles, resets, stalls
//   scripted_http.hpp  a server that answers a fixed script and records requests
//   silent_port.hpp    a port where a connect never completes
//   s3rver_process.hpp s3rver as a child process (its own library, shared
//                      with the benchmarks: no GoogleTest in it)
//   fake_env.hpp       a made-up environment for the AWS set-up lookups

#include "cache_test.hpp"
#include "files.hpp"
#include "paths.hpp"
#include "process.hpp"
#include "temp_dir.hpp"
#include "wait.hpp"
