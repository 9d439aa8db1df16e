// neuron_cc_wrapper on an S3 cache (the run's RADOS Gateway on loopback), killed by
// SIGKILL in the middle of its upload: the remote entry it leaves is never
// done (no model.done), whatever request the kill lands on; the next run
// takes the dead wrapper's lock over (at once on this host, at its expiry
// from another) and completes the entry; and the killed node's next launcher
// run uploads the result its mirror has.
//
// The kill lands on a chosen request through a proxy of this file's own
// (HoldingProxy below) in front of the S3 server: it forwards every request but
// one, chosen by method and object name, which it holds: neither forwarded
// nor answered, so the server never sees any of it. The test polls the
// proxy's request log until the held request has arrived, then kills the
// wrapper's process group. (support/fault_proxy.hpp picks its victims by
// their order among the next requests, not by name, and lets a stalled
// request's body reach the server: it cannot stop the wrapper on its NEFF.)

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <npc/storage/lock.hpp>
#include <npc/storage/s3_client.hpp>
#include <npc/util/file_lock.hpp>
#include <npc/util/process.hpp>

#include "s3_fixture.hpp"

namespace npc::test {
namespace {

constexpr auto kHoldDeadline = std::chrono::seconds(30);

// ---- A proxy that holds one kind of request --------------------------------

// Forwards HTTP/1.1 between the wrapper and the S3 server, one thread per
// connection, and logs every request as "METHOD name" (name: the last
// segment of the path, the object's file name). A request matching hold()
// is logged and then swallowed: neither its head nor its body is passed on
// and no answer comes, as a network that stopped in the middle of the
// upload. Requests are split by Content-Length (our client sends no chunked
// bodies).
class HoldingProxy {
public:
  explicit HoldingProxy(int upstream_port) : upstream_port_(upstream_port) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, 64) != 0 || ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      ADD_FAILURE() << "holding proxy cannot listen on loopback: " << std::strerror(errno);
    port_ = ntohs(addr.sin_port);
    if (::pipe2(wake_, O_CLOEXEC) != 0) ADD_FAILURE() << "holding proxy cannot make a pipe";
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~HoldingProxy() {
    // The pipe stays readable once written: every thread sees it and ends.
    std::ignore = ::write(wake_[1], "x", 1);
    acceptor_.join();
    for (auto& t : connections_) t.join();
    ::close(listen_fd_);
    ::close(wake_[0]);
    ::close(wake_[1]);
  }
  HoldingProxy(const HoldingProxy&) = delete;
  HoldingProxy& operator=(const HoldingProxy&) = delete;

  [[nodiscard]] std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // Every later request with this method and object name is held.
  void hold(std::string method, std::string name) {
    std::lock_guard lock(mutex_);
    hold_method_ = std::move(method);
    hold_name_ = std::move(name);
  }
  [[nodiscard]] std::vector<std::string> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  // The names of the PUT requests, in order, held ones included.
  [[nodiscard]] std::vector<std::string> puts() const {
    std::vector<std::string> names;
    for (const auto& r : requests())
      if (r.starts_with("PUT ")) names.push_back(r.substr(4));
    return names;
  }
  [[nodiscard]] int held() const {
    std::lock_guard lock(mutex_);
    return held_;
  }

private:
  static bool send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
    return true;
  }

  void accept_loop() {
    for (;;) {
      pollfd fds[2] = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents != 0) return;
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client < 0) continue;
      connections_.emplace_back([this, client] { serve(client); });
    }
  }

  // True when the request whose head this is must be held.
  bool log_request(std::string_view head, std::uint64_t& content_length) {
    std::string_view line = head.substr(0, head.find("\r\n"));
    std::string_view method = line.substr(0, line.find(' '));
    std::string_view target = line.substr(method.size() + 1);
    target = target.substr(0, target.find(' '));
    target = target.substr(0, target.find('?'));
    std::string_view name = target.substr(target.rfind('/') + 1);
    content_length = 0;
    for (std::size_t at = head.find("\r\n"); at != std::string_view::npos && at + 2 < head.size();) {
      at += 2;
      std::size_t end = head.find("\r\n", at);
      std::string header(head.substr(at, end - at));
      std::transform(header.begin(), header.end(), header.begin(), [](unsigned char c) { return std::tolower(c); });
      if (header.starts_with("content-length:")) content_length = std::stoull(header.substr(15));
      at = end;
    }
    std::lock_guard lock(mutex_);
    requests_.push_back(std::string(method) + " " + std::string(name));
    bool hold = method == hold_method_ && name == hold_name_;
    if (hold) ++held_;
    return hold;
  }

  void serve(int client) {
    int upstream = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(upstream_port_));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (upstream < 0 || ::connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      if (upstream >= 0) ::close(upstream);
      ::close(client);
      return;
    }
    std::string head;
    std::uint64_t body_left = 0;
    bool holding = false;
    char buffer[64 * 1024];
    for (;;) {
      pollfd fds[3] = {{wake_[0], POLLIN, 0}, {client, POLLIN, 0}, {upstream, POLLIN, 0}};
      if (::poll(fds, upstream >= 0 ? 3 : 2, -1) < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (fds[0].revents != 0) break;
      if (upstream >= 0 && fds[2].revents != 0) {
        ssize_t n = ::recv(upstream, buffer, sizeof buffer, 0);
        if (n <= 0 && holding) { // the server ended an idle connection: the client still waits
          ::close(upstream);
          upstream = -1;
        } else if (n <= 0 || !send_all(client, std::string_view(buffer, static_cast<std::size_t>(n)))) {
          break;
        }
      }
      if (fds[1].revents == 0) continue;
      ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
      if (n <= 0) break; // the client went away (or was killed)
      std::string_view in(buffer, static_cast<std::size_t>(n));
      bool broken = false;
      while (!in.empty() && !holding && !broken) {
        if (body_left > 0) {
          std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(body_left, in.size()));
          broken = !send_all(upstream, in.substr(0, take));
          body_left -= take;
          in.remove_prefix(take);
          continue;
        }
        std::size_t before = head.size();
        head.append(in);
        std::size_t end = head.find("\r\n\r\n");
        if (end == std::string::npos) break; // more of the head to come
        end += 4;
        in.remove_prefix(end - before);
        head.resize(end);
        if (log_request(head, body_left)) {
          holding = true; // this request and whatever follows on its connection are dropped
        } else {
          broken = !send_all(upstream, head);
        }
        head.clear();
      }
      if (broken) break;
    }
    if (upstream >= 0) ::close(upstream);
    ::close(client);
  }

  int upstream_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  mutable std::mutex mutex_; // guards what follows
  std::string hold_method_, hold_name_;
  std::vector<std::string> requests_;
  int held_ = 0;
  std::vector<std::thread> connections_; // only the acceptor adds, until it is joined
  std::thread acceptor_;
};

// ---- The tests ------------------------------------------------------------

class S3Kill : public S3CacheTest {
protected:
  void SetUp() override {
    S3CacheTest::SetUp();
    if (HasFatalFailure()) return;
    proxy_ = std::make_unique<HoldingProxy>(server_.port());
  }
  void TearDown() override {
    // A wrapper still running (a test that failed before its kill) goes
    // with its process group, reaped, before its proxy and server.
    wrapper_.reset();
    proxy_.reset();
    S3CacheTest::TearDown();
  }

  fs::path graph_path() const { return dir() / "graphs" / "a.hlo"; }
  static std::vector<std::string> entry_keys(std::initializer_list<const char*> files) {
    std::vector<std::string> keys;
    for (const char* f : files) keys.push_back(version_dir() + "/E/" + f);
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  fs::path mirror_entry(const std::string& node) const {
    fs::path version = dir() / node / "s3" / "test-bucket" / "team" / (std::string("neuronxcc-") + kStandinVersion);
    auto names = names_in(version);
    return names.size() == 1 ? version / names[0] : version / "<not one entry>";
  }

  std::vector<std::string> full_keys() {
    auto c = client();
    if (!c) return {};
    auto all = c->list_all(kS3TestBucket, {});
    if (!all) {
      ADD_FAILURE() << all.error();
      return {};
    }
    std::vector<std::string> keys;
    for (const auto& o : all->objects) keys.push_back(o.key);
    return keys;
  }
  std::string full_key(const std::string& suffix) {
    for (const auto& key : full_keys())
      if (key.ends_with(suffix)) return key;
    return "";
  }
  // Starts a wrapper compiling a.hlo through the proxy, which holds its
  // PUT of `held_file`; waits (bounded) until that PUT has reached the
  // proxy, SIGKILLs the wrapper's process group and reaps it. Returns the
  // killed wrapper's pid.
  pid_t kill_during_put_of(const std::string& held_file) {
    write_text(graph_path(), "HloModule a\n");
    proxy_->hold("PUT", held_file);
    std::vector<std::string> argv = {tool_path("neuron_cc_wrapper").string(), "compile", "--graph",
                                     graph_path().string(), "--output", (dir() / "killed.neff").string()};
    wrapper_.emplace(argv, options({{"AWS_ENDPOINT_URL_S3", proxy_->endpoint()}}), dir() / "killed");
    const pid_t pid = wrapper_->pid();
    // Stops early when the wrapper ends without reaching the upload.
    bool reached = wait_until([&] { return proxy_->held() > 0 || !wrapper_->running(); }, kHoldDeadline);
    EXPECT_TRUE(reached && proxy_->held() == 1)
        << "the PUT of " << held_file << " never reached the proxy; requests: "
        << testing::PrintToString(proxy_->requests());
    util::kill_process_group(pid, SIGKILL);
    RunResult killed = wrapper_->wait();
    wrapper_.reset();
    EXPECT_TRUE(killed.signaled && killed.signal == SIGKILL) << killed.describe();
    // Nothing of the run is left: the wrapper, and the compiler it ran.
    EXPECT_EQ(describe(processes_with_cmdline(graph_path().string())), "");
    EXPECT_EQ(describe(processes_with_cmdline((dir() / "node-a").string())), "");
    return pid;
  }

  // The lock the killed wrapper left: its, and still unexpired (a successor
  // waits for it or for its expiry, kRemoteLockTtl after it was taken).
  void expect_lock_of(pid_t pid) {
    std::string text = object("/model.hlo_module.pb.lock");
    auto record = storage::LockRecord::parse(text);
    ASSERT_TRUE(record) << text;
    auto holder = util::LockHolder::parse(record->owner);
    ASSERT_TRUE(holder) << text;
    EXPECT_EQ(holder->pid, pid) << text;
    const auto now = std::chrono::duration_cast<std::chrono::seconds>(
                         std::chrono::system_clock::now().time_since_epoch()).count();
    EXPECT_GT(record->expires_unix, now + storage::kLockTtl.count() / 2) << text;
  }

  // The dead holder's lock as another node sees it (a holder of another
  // host, whose liveness cannot be told from here), and once kRemoteLockTtl
  // has passed (`expired`: its expiry past). The test rewrites host, boot and expiry (the
  // rest of the record as it was) instead of running a second host and
  // waiting ten minutes; --lock-timeout cannot help, as it bounds the wait
  // only, not the remote lock's time to live.
  void make_the_lock_another_hosts(bool expired = true) {
    std::string key = full_key("/model.hlo_module.pb.lock");
    ASSERT_FALSE(key.empty()) << testing::PrintToString(objects());
    auto c = client();
    ASSERT_TRUE(c);
    auto text = c->get_object(kS3TestBucket, key, 1 << 16);
    ASSERT_TRUE(text && *text);
    auto record = storage::LockRecord::parse(**text);
    ASSERT_TRUE(record) << **text;
    auto holder = util::LockHolder::parse(record->owner);
    ASSERT_TRUE(holder) << **text;
    holder->host = "node-elsewhere";
    holder->boot_id = "0b0b0b0b-0000-0000-0000-000000000000";
    record->owner = holder->serialize();
    if (expired)
      record->expires_unix = std::chrono::duration_cast<std::chrono::seconds>(
                               (std::chrono::system_clock::now() - std::chrono::minutes(1)).time_since_epoch())
                               .count();
    auto put = c->put_object(kS3TestBucket, key, record->serialize());
    ASSERT_TRUE(put) << put.error();
  }

  // The next run, on another node (its own mirror: node-a's mirror has the
  // killed run's compile done and would serve it without asking S3),
  // straight to the S3 server. --lock-timeout bounds its wait should the expired
  // lock not be taken over: it then fails (exit 3) in 20 s, not 6 hours.
  enum class DeadHolder { on_this_host, elsewhere_expired };
  void the_next_run_completes_the_entry(pid_t killed, DeadHolder dead) {
    if (dead == DeadHolder::elsewhere_expired) {
      ASSERT_NO_FATAL_FAILURE(make_the_lock_another_hosts());
    }
    auto next = run_tool("neuron_cc_wrapper",
                         {"compile", "--graph", graph_path().string(), "--output", (dir() / "next.neff").string(),
                          "--lock-timeout", "20"},
                         {{"NEURON_COMPILE_CACHE_MIRROR", (dir() / "node-b").string()}});
    ASSERT_EQ(next.exit_code, 0) << next.describe();
    // It took the dead wrapper's lock over: at once on this host (its holder
    // is gone), past its expiry from another.
    EXPECT_NE(next.err.find("taking over the stale lock s3://test-bucket/" + full_key("/model.hlo_module.pb") +
                            ".lock (held by pid " + std::to_string(killed) + " on "),
              std::string::npos)
        << next.err;
    EXPECT_EQ(compiles(), 2u) << next.describe(); // the killed run's, and this one's
    EXPECT_EQ(objects(), entry_keys({"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff",
                                     "npc-entry.json"}));
    std::string neff = read_text(mirror_entry("node-b") / "model.neff");
    EXPECT_FALSE(neff.empty());
    EXPECT_EQ(object("/model.neff"), neff);
    EXPECT_EQ(read_text(dir() / "next.neff"), neff);
    EXPECT_EQ(object("/model.hlo_module.pb"), read_text(graph_path()));
  }

  std::unique_ptr<HoldingProxy> proxy_;
  std::optional<Child> wrapper_;
};

TEST_F(S3Kill, AWrapperKilledDuringTheNeffUploadLeavesNoDoneEntry) {
  pid_t pid = kill_during_put_of("model.neff");
  // The upload went graph and flags first, then the NEFF, where it stopped.
  EXPECT_EQ(proxy_->puts(), (std::vector<std::string>{"model.hlo_module.pb.lock", "compile_flags.json",
                                                       "model.hlo_module.pb", "model.neff"}));
  // No NEFF, no record, no marker: the graph, its flags and the dead
  // wrapper's lock.
  EXPECT_EQ(objects(), entry_keys({"compile_flags.json", "model.hlo_module.pb", "model.hlo_module.pb.lock"}));
  expect_lock_of(pid);
  // The compile itself was done in the mirror before the upload began.
  EXPECT_EQ(compiles(), 1u);
  EXPECT_TRUE(fs::exists(mirror_entry("node-a") / "model.done"));
}

TEST_F(S3Kill, TheNextRunAfterTheKillCompilesAndCompletesTheEntry) {
  pid_t pid = kill_during_put_of("model.neff");
  ASSERT_EQ(objects(), entry_keys({"compile_flags.json", "model.hlo_module.pb", "model.hlo_module.pb.lock"}));
  the_next_run_completes_the_entry(pid, DeadHolder::on_this_host);
}

TEST_F(S3Kill, AWrapperKilledBeforeTheDoneMarkerLeavesNoDoneEntry) {
  pid_t pid = kill_during_put_of("model.done");
  EXPECT_EQ(proxy_->puts(), (std::vector<std::string>{"model.hlo_module.pb.lock", "compile_flags.json",
                                                       "model.hlo_module.pb", "model.neff", "npc-entry.json",
                                                       "model.done"}));
  // The whole NEFF and its record are there, but not the marker: the
  // entry is not done.
  EXPECT_EQ(objects(), entry_keys({"compile_flags.json", "model.hlo_module.pb", "model.hlo_module.pb.lock",
                                   "model.neff", "npc-entry.json"}));
  EXPECT_EQ(object("/model.neff"), read_text(mirror_entry("node-a") / "model.neff"));
  expect_lock_of(pid);
  EXPECT_EQ(compiles(), 1u);
  // The scan of S3: the lock of a process of this host that is gone holds
  // nothing; the same lock of another host holds until its expiry.
  const std::string scan_line = std::string("neuronxcc-") + kStandinVersion + ": 0 done, ";
  EXPECT_EQ(run_tool("neuron_parallel_compile", {"--command", "scan"}).out,
            scan_line + "1 pending, 0 locked (s3://test-bucket/team)\n");
  ASSERT_NO_FATAL_FAILURE(make_the_lock_another_hosts(/*expired=*/false));
  EXPECT_EQ(run_tool("neuron_parallel_compile", {"--command", "scan"}).out,
            scan_line + "0 pending, 1 locked (s3://test-bucket/team)\n");
}

TEST_F(S3Kill, TheNextRunAfterAKillBeforeTheDoneMarkerCompletesTheEntry) {
  pid_t pid = kill_during_put_of("model.done");
  ASSERT_EQ(objects(), entry_keys({"compile_flags.json", "model.hlo_module.pb", "model.hlo_module.pb.lock",
                                   "model.neff", "npc-entry.json"}));
  the_next_run_completes_the_entry(pid, DeadHolder::elsewhere_expired);
}

// The killed node's own mirror has the result (its compile ended before
// the upload): a wrapper's hit there never asks S3, but the node's next
// launcher run finds S3 without it and uploads it, under the lock the dead
// wrapper left (taken over at once: its holder is gone), compiling nothing.
TEST_F(S3Kill, TheKilledNodesNextLauncherRunUploadsTheResultItsMirrorHas) {
  std::ignore = kill_during_put_of("model.neff");
  ASSERT_EQ(objects(), entry_keys({"compile_flags.json", "model.hlo_module.pb", "model.hlo_module.pb.lock"}));
  auto run = run_tool("neuron_parallel_compile",
                      {"--command", "compile", "--parallel_compile_workdir", (dir() / "wd").string()});
  ASSERT_EQ(run.exit_code, 0) << run.describe();
  EXPECT_NE(run.err.find("1 result(s) of " + (dir() / "node-a" / "s3" / "test-bucket" / "team").string() +
                         " that s3://test-bucket/team lacked uploaded"),
            std::string::npos)
      << run.err;
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(objects(), entry_keys({"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff",
                                   "npc-entry.json"}));
  EXPECT_EQ(object("/model.neff"), read_text(mirror_entry("node-a") / "model.neff"));
}

// The launcher retries a worker killed while its upload stalled: the retry
// finds the result in its mirror and S3 without it, under the dead worker's
// lock (taken over: its holder is gone). It uploads that result and says
// so; it is no graph "compiled by another process", and S3 is complete.
TEST_F(S3Kill, ARetryOfAWorkerKilledDuringItsUploadUploadsTheMirrorsResult) {
  std::ignore = kill_during_put_of("model.neff");
  ASSERT_EQ(objects(), entry_keys({"compile_flags.json", "model.hlo_module.pb", "model.hlo_module.pb.lock"}));
  auto retry = run_tool("neuron_cc_wrapper", {"compile-entry", mirror_entry("node-a").string(), "--shared-cache",
                                              "s3://test-bucket/team", "--lock-timeout", "20"});
  ASSERT_EQ(retry.exit_code, 0) << retry.describe();
  EXPECT_NE(retry.err.find("by an earlier attempt that did not finish its upload"), std::string::npos) << retry.err;
  EXPECT_NE(retry.out.find("Compiled " + mirror_entry("node-a").string()), std::string::npos) << retry.out;
  EXPECT_EQ(compiles(), 1u);
  EXPECT_EQ(objects(), entry_keys({"compile_flags.json", "model.done", "model.hlo_module.pb", "model.neff",
                                   "npc-entry.json"}));
  EXPECT_EQ(object("/model.neff"), read_text(mirror_entry("node-a") / "model.neff"));
}

} // namespace
} // namespace npc::test
