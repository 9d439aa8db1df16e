// S3Client's transport: one request over libcurl, signed with its built-in
// AWS SigV4, its body streamed from memory or a file and its answer into
// either, retried with back-off within a budget (S3ClientOptions); and the
// client's credentials kept fresh. The operations are in s3_client.cpp.

#include <npc/storage/s3_client.hpp>
#include <npc/storage/s3_request.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <curl/curl.h>
#include <spdlog/spdlog.h>

#include <npc/storage/curl_library.hpp>
#include <npc/storage/s3_url.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/random.hpp>
#include <npc/util/sha256.hpp>

namespace npc::storage {

namespace {

// Names the program in the server's access log (S3 server access logs and
// CloudTrail show it): which tool, of which release, sent a request.
const std::string& user_agent() {
  static const std::string agent = [] {
    return "neuron-parallel-compile/" NPC_VERSION " (" + std::string(program_invocation_short_name) + ")";
  }();
  return agent;
}

} // namespace

namespace {

// An error body worth keeping for a message is small; S3's are < 1 KiB.
constexpr std::size_t kMaxErrorBody = 64 * 1024;

// IMDS hands out a fresh set of an instance role's keys 5 minutes before the
// old ones expire: renewing within that window gets the new set.
constexpr auto kRenewBefore = std::chrono::minutes(5);
// After a failed renewal (IMDS unreachable a moment), the next try waits
// this long: each costs up to a few seconds, and the old keys still work
// until their expiry.
constexpr auto kRenewalRetryAfter = std::chrono::seconds(30);

// One request's moving parts, shared with the libcurl callbacks.
struct Transfer {
  const CurlLibrary* lib = nullptr;
  CURL* curl = nullptr;
  // Upload.
  std::string_view body;
  int body_fd = -1;
  std::uint64_t body_offset = 0;
  // Download: the 2xx body goes to the sink, any other to error_body.
  SinkKind sink = SinkKind::none;
  std::uint64_t max_bytes = 0;
  int sink_fd = -1;
  std::string data;
  std::string error_body;
  bool too_large = false;
  int write_errno = 0;
  std::map<std::string, std::string> headers; // names lower-case
};

bool success_status(const Transfer& t) {
  long status = 0;
  t.lib->easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &status);
  return status >= 200 && status < 300;
}

std::size_t on_write(char* ptr, std::size_t size, std::size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  std::size_t n = size * count;
  if (!success_status(t) || t.sink == SinkKind::none) {
    if (t.error_body.size() < kMaxErrorBody) t.error_body.append(ptr, std::min(n, kMaxErrorBody - t.error_body.size()));
    return n;
  }
  if (t.sink == SinkKind::memory) {
    if (t.data.size() + n > t.max_bytes) {
      t.too_large = true;
      return 0;
    }
    t.data.append(ptr, n);
    return n;
  }
  for (std::size_t done = 0; done < n;) {
    ssize_t w = ::write(t.sink_fd, ptr + done, n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      t.write_errno = errno;
      return 0;
    }
    done += static_cast<std::size_t>(w);
  }
  return n;
}

std::size_t on_header(char* ptr, std::size_t size, std::size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  std::size_t n = size * count;
  std::string_view line(ptr, n);
  if (line.substr(0, 5) == "HTTP/") { // a new response (after 100 Continue, say)
    t.headers.clear();
    return n;
  }
  std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return n;
  std::string name(line.substr(0, colon));
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
  t.headers[name] = std::string(value);
  return n;
}

std::size_t on_read(char* buffer, std::size_t size, std::size_t count, void* user) {
  auto& t = *static_cast<Transfer*>(user);
  std::size_t n = size * count;
  if (t.body_fd < 0) {
    std::size_t left = t.body.size() - t.body_offset;
    std::size_t take = std::min(n, left);
    std::memcpy(buffer, t.body.data() + t.body_offset, take);
    t.body_offset += take;
    return take;
  }
  for (;;) {
    ssize_t r = ::read(t.body_fd, buffer, n);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return CURL_READFUNC_ABORT;
    t.body_offset += static_cast<std::uint64_t>(r);
    return static_cast<std::size_t>(r);
  }
}

// libcurl rewinds the body when it must send it again (a redirect, a
// connection that closed under it).
int on_seek(void* user, curl_off_t offset, int origin) {
  auto& t = *static_cast<Transfer*>(user);
  if (origin != SEEK_SET || offset < 0) return CURL_SEEKFUNC_CANTSEEK;
  if (t.body_fd >= 0 && ::lseek(t.body_fd, offset, SEEK_SET) < 0) return CURL_SEEKFUNC_FAIL;
  t.body_offset = static_cast<std::uint64_t>(offset);
  return CURL_SEEKFUNC_OK;
}

bool transient(CURLcode code) {
  switch (code) {
  case CURLE_COULDNT_CONNECT:
  case CURLE_COULDNT_RESOLVE_HOST:
  case CURLE_OPERATION_TIMEDOUT:
  case CURLE_SEND_ERROR:
  case CURLE_RECV_ERROR:
  case CURLE_GOT_NOTHING:
  case CURLE_PARTIAL_FILE:
  case CURLE_HTTP2:
  case CURLE_HTTP2_STREAM:
    return true;
  default:
    return false;
  }
}

bool retryable_status(long status, const std::string& code) {
  return status == 408 || status == 429 || status == 500 || status == 502 || status == 503 || status == 504 ||
         code == "SlowDown" || code == "InternalError" || code == "RequestTimeout";
}

struct CurlSlist {
  explicit CurlSlist(const CurlLibrary& lib_) : lib(lib_) {}
  CurlSlist(const CurlSlist&) = delete;
  CurlSlist& operator=(const CurlSlist&) = delete;
  ~CurlSlist() { lib.slist_free_all(list); }
  void add(const std::string& line) { list = lib.slist_append(list, line.c_str()); }
  const CurlLibrary& lib;
  curl_slist* list = nullptr;
};

bool virtual_hosted(const S3Config& config, std::string_view bucket) {
  // A dotted bucket name would not match the wildcard TLS certificate.
  return config.endpoint.empty() && bucket.find('.') == std::string_view::npos;
}

std::string bucket_base(const S3Config& config, std::string_view bucket) {
  if (!config.endpoint.empty()) return config.endpoint + "/" + std::string(bucket);
  if (virtual_hosted(config, bucket)) return "https://" + std::string(bucket) + ".s3." + config.region + ".amazonaws.com";
  return "https://s3." + config.region + ".amazonaws.com/" + std::string(bucket);
}

} // namespace

std::string s3_target(std::string_view bucket, std::string_view key) {
  return "s3://" + std::string(bucket) + "/" + std::string(key);
}

std::string endpoint_name(const S3Config& config, std::string_view bucket) {
  if (!config.endpoint.empty()) return config.endpoint;
  if (virtual_hosted(config, bucket)) return "https://" + std::string(bucket) + ".s3." + config.region + ".amazonaws.com";
  return "https://s3." + config.region + ".amazonaws.com";
}

Result<std::unique_ptr<S3Client>> S3Client::create(S3Config config, S3ClientOptions options) {
  if (config.credentials.access_key_id.empty() || config.credentials.secret_access_key.empty())
    return fail("S3 client needs an access key id and a secret access key");
  if (!config.endpoint.empty() && config.endpoint.find("://") == std::string::npos)
    return fail("S3 endpoint '" + config.endpoint + "' has no scheme (write http://HOST:PORT or https://HOST)");
  while (!config.endpoint.empty() && config.endpoint.back() == '/') config.endpoint.pop_back();
  // The first S3 client of the process loads libcurl (see curl_library.hpp).
  auto lib = load_curl_library();
  if (!lib) return fail(lib.error());
  CURL* curl = (*lib)->easy_init();
  if (curl == nullptr) return fail("cannot start libcurl (curl_easy_init failed)");
  return std::unique_ptr<S3Client>(new S3Client(std::move(config), options, curl));
}

S3Client::S3Client(S3Config config, S3ClientOptions options, void* curl)
    : config_(std::move(config)), options_(options), curl_(curl) {}

S3Client::~S3Client() {
  // A client exists only once libcurl is loaded: this finds it loaded.
  if (auto lib = load_curl_library()) (*lib)->easy_cleanup(static_cast<CURL*>(curl_));
}

std::string S3Client::object_url(std::string_view bucket, std::string_view key) const {
  return bucket_base(config_, bucket) + "/" + s3_uri_encode(key, EncodeSlash::no);
}

namespace {

// What one attempt of a request sends and where its answer goes, as the
// callbacks see it: the body from memory or a file (rewound), the answer
// into memory or a file (emptied), so that a retry starts from nothing.
Status prepare_transfer(Transfer& t, const S3Client::Request& request) {
  t.body = request.body;
  t.body_fd = request.body_fd;
  t.sink = request.sink;
  t.max_bytes = request.max_bytes;
  t.sink_fd = request.sink_fd;
  if (t.body_fd >= 0 && ::lseek(t.body_fd, 0, SEEK_SET) < 0)
    return fail(std::string("cannot rewind the file to upload: ") + std::strerror(errno));
  if (t.sink_fd >= 0 && (::ftruncate(t.sink_fd, 0) != 0 || ::lseek(t.sink_fd, 0, SEEK_SET) < 0))
    return fail(std::string("cannot truncate the download file: ") + std::strerror(errno));
  return ok_status();
}

// What an attempt is sent to, signed with, and bounded by.
struct AttemptSetup {
  const std::string& url;
  const std::string& sigv4; // "aws:amz:REGION:s3"
  const S3Credentials& credentials;
  const S3ClientOptions& options;
  std::chrono::milliseconds budget_left; // of S3ClientOptions::max_retry_time
};

// Sets libcurl's options for one attempt of `request`. Returns whether the
// attempt is cut at the end of the retry budget rather than at the request
// timeout: if it times out, the budget is spent.
bool set_attempt_options(const CurlLibrary& lib, CURL* curl, const S3Client::Request& request,
                         const AttemptSetup& setup, Transfer& t, const CurlSlist& headers, char* error_buffer) {
  const S3ClientOptions& options = setup.options;
  lib.easy_setopt(curl, CURLOPT_URL, setup.url.c_str());
  // Keys such as "a/../b" are names in S3, not paths to normalize.
  lib.easy_setopt(curl, CURLOPT_PATH_AS_IS, 1L);
  lib.easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  lib.easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  lib.easy_setopt(curl, CURLOPT_AWS_SIGV4, setup.sigv4.c_str());
  lib.easy_setopt(curl, CURLOPT_USERNAME, setup.credentials.access_key_id.c_str());
  lib.easy_setopt(curl, CURLOPT_PASSWORD, setup.credentials.secret_access_key.c_str());
  lib.easy_setopt(curl, CURLOPT_HTTPHEADER, headers.list);
  lib.easy_setopt(curl, CURLOPT_USERAGENT, user_agent().c_str());
  lib.easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
  lib.easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, options.low_speed_bytes);
  lib.easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, static_cast<long>(options.low_speed_time.count()));
  bool cut_at_budget = false;
  if (request.bound == AttemptBound::whole_attempt) {
    // At most what is left of the retry budget (at least 1 ms: 0 would
    // mean no limit to libcurl), so the last attempt ends within it too.
    auto limit = std::max<std::int64_t>(1, std::min(options.request_timeout.count(), setup.budget_left.count()));
    cut_at_budget = setup.budget_left.count() < options.request_timeout.count();
    lib.easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(limit));
  }
  lib.easy_setopt(curl, CURLOPT_SSL_VERIFYPEER, options.verify_tls ? 1L : 0L);
  lib.easy_setopt(curl, CURLOPT_SSL_VERIFYHOST, options.verify_tls ? 2L : 0L);
  lib.easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_write);
  lib.easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  lib.easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
  lib.easy_setopt(curl, CURLOPT_HEADERDATA, &t);
  if (request.upload) {
    lib.easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    lib.easy_setopt(curl, CURLOPT_INFILESIZE_LARGE, static_cast<curl_off_t>(request.body_size));
    lib.easy_setopt(curl, CURLOPT_READFUNCTION, on_read);
    lib.easy_setopt(curl, CURLOPT_READDATA, &t);
    lib.easy_setopt(curl, CURLOPT_SEEKFUNCTION, on_seek);
    lib.easy_setopt(curl, CURLOPT_SEEKDATA, &t);
  } else if (request.method == "HEAD") {
    lib.easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET") {
    lib.easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }
  return cut_at_budget;
}

// Why an attempt that got no answer got none, in the system's words where
// it has them ("Connection refused"), else libcurl's.
std::string why_no_answer(const CurlLibrary& lib, CURL* curl, CURLcode code, const char* error_buffer) {
  long os_errno = 0;
  lib.easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno);
  if (code == CURLE_COULDNT_CONNECT && os_errno != 0) return std::strerror(static_cast<int>(os_errno));
  return error_buffer[0] != '\0' ? std::string(error_buffer) : lib.easy_strerror(code);
}

// The pause before attempt `attempt` + 1: drawn up to an exponential cap
// ("full jitter"), so that clients refused together do not retry together.
std::chrono::milliseconds backoff_after(const S3ClientOptions& options, int attempt) {
  auto cap =
      std::min<std::int64_t>(options.max_backoff.count(), options.base_backoff.count() << std::min(attempt - 1, 20));
  return std::chrono::milliseconds(util::random_between(0, std::max<std::int64_t>(cap, 0)));
}

} // namespace

Result<S3Client::Response> S3Client::perform(Request& request) {
  auto* curl = static_cast<CURL*>(curl_);
  auto loaded = load_curl_library();
  if (!loaded) return fail(loaded.error());
  const CurlLibrary& lib = **loaded;
  std::string url = request.key.empty() && request.method != "PUT" ? bucket_base(config_, request.bucket)
                                                                    : object_url(request.bucket, request.key);
  if (!request.query.empty()) url += "?" + request.query;
  const std::string sigv4 = "aws:amz:" + config_.region + ":s3";

  const auto started = std::chrono::steady_clock::now();
  bool renewed_after_refusal = false;
  for (int attempt = 1;; ++attempt) {
    last_attempts_ = attempt;
    renew_credentials(false);
    // reset keeps the open connection, the DNS and TLS session caches.
    lib.easy_reset(curl);
    Transfer t;
    t.lib = &lib;
    t.curl = curl;
    if (auto s = prepare_transfer(t, request); !s) return fail(s.error());
    CurlSlist headers(lib);
    headers.add("x-amz-content-sha256: " + request.payload_hash);
    if (!config_.credentials.session_token.empty())
      headers.add("x-amz-security-token: " + config_.credentials.session_token);
    for (const auto& h : request.headers) headers.add(h);
    char error_buffer[CURL_ERROR_SIZE] = {};
    const auto budget_left = std::chrono::duration_cast<std::chrono::milliseconds>(
        options_.max_retry_time - (std::chrono::steady_clock::now() - started));
    const bool cut_at_budget = set_attempt_options(
        lib, curl, request, {url, sigv4, config_.credentials, options_, budget_left}, t, headers, error_buffer);

    CURLcode code = lib.easy_perform(curl);
    std::string failure;
    bool retry = false;
    Response response;
    if (code == CURLE_OK) {
      lib.easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
      response.headers = std::move(t.headers);
      bool ok = response.status >= 200 && response.status < 300;
      response.body = ok && t.sink == SinkKind::memory ? std::move(t.data) : std::move(t.error_body);
      const std::string error_code = ok ? std::string() : parse_s3_error(response.body).code;
      // Keys that expired sooner than they said (or said nothing): fetched
      // again once, and the request made again with them.
      if (!ok && error_code == "ExpiredToken" && !renewed_after_refusal) {
        renewed_after_refusal = true;
        if (renew_credentials(true)) continue;
      }
      if (ok || !retryable_status(response.status, error_code)) return response;
      retry = true;
    } else if (t.too_large) {
      return fail(s3_target(request.bucket, request.key) + " is larger than " + std::to_string(request.max_bytes) +
                  " bytes");
    } else if (t.write_errno != 0) {
      return fail("cannot write the download of " + s3_target(request.bucket, request.key) + ": " +
                  std::strerror(t.write_errno));
    } else {
      failure = "cannot reach S3 endpoint " + endpoint_name(config_, request.bucket) + ": " +
                why_no_answer(lib, curl, code, error_buffer);
      retry = transient(code);
    }

    const auto backoff = backoff_after(options_, attempt);
    // An attempt that timed out at the budget's end leaves nothing for
    // another, even when libcurl's clock ended it a moment early and the
    // drawn back-off is 0: a retry with a millisecond left only fails again.
    bool out_of_time = (cut_at_budget && code == CURLE_OPERATION_TIMEDOUT) ||
                       std::chrono::steady_clock::now() + backoff - started > options_.max_retry_time;
    if (!retry || attempt >= options_.max_attempts || out_of_time) {
      if (code == CURLE_OK) return response; // the caller words the HTTP error
      return fail(failure + (attempt > 1 ? " (after " + std::to_string(attempt) + " attempts)" : ""));
    }
    std::this_thread::sleep_for(backoff);
  }
}

bool S3Client::renew_credentials(bool refused) {
  if (!config_.renew_credentials) return false;
  const auto& expires = config_.credentials.expires;
  if (!refused && (!expires || std::chrono::system_clock::now() + kRenewBefore < *expires)) return false;
  const auto now = std::chrono::steady_clock::now();
  if (renewal_failed_at_ != std::chrono::steady_clock::time_point{} && now - renewal_failed_at_ < kRenewalRetryAfter)
    return false;
  auto fresh = config_.renew_credentials();
  if (!fresh) {
    renewal_failed_at_ = now;
    spdlog::warn("cannot renew the S3 credentials: {}; going on with the current ones", fresh.error());
    return false;
  }
  renewal_failed_at_ = {};
  config_.credentials = std::move(*fresh);
  spdlog::debug("renewed the S3 credentials (access key {})", config_.credentials.access_key_id);
  return true;
}

} // namespace npc::storage
