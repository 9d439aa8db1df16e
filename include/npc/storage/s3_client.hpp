#pragma once
// A small S3 client over libcurl: the object operations a cache needs, with
// requests signed by libcurl's AWS SigV4 support, retries with backoff on
// throttling and transient failures, and one-line errors that name the
// object and what to do. One client holds one connection (not thread-safe:
// one client per thread).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <npc/storage/s3_config.hpp>
#include <npc/storage/s3_xml.hpp>
#include <npc/storage/storage.hpp>
#include <npc/util/result.hpp>

namespace npc::storage {

struct S3ClientOptions {
  // A server that does not accept a connection in this time is down.
  std::chrono::milliseconds connect_timeout{10000};
  // A transfer slower than low_speed_bytes per second for low_speed_time is
  // dead (a hung server, a broken route) and retried, rather than waited on.
  // This bound alone lets a big transfer (a NEFF of hundreds of MB) take
  // as long as it needs while bytes keep moving.
  long low_speed_bytes = 1024;
  std::chrono::seconds low_speed_time{30};
  // A request whose bodies are held in memory (LIST, HEAD, DELETE, the GET
  // and PUT of a lock, a record or a marker: all small by design, anything
  // big is streamed from or to a file) is given up after this long, and
  // retried as any transient failure, within max_retry_time. A healthy one
  // takes tens of milliseconds (a LIST page of 1000 keys well under 1 s),
  // so only a hung or trickling server meets it; without it, one such
  // request could hold its caller (the launcher's loop looking at S3) for
  // the whole low_speed_time, and a trickle above low_speed_bytes forever.
  // The attempt is also cut at what is left of max_retry_time.
  std::chrono::milliseconds request_timeout{10000};
  // Retries: the first try counts as one attempt; no new attempt starts
  // past max_retry_time from the first.
  int max_attempts = 5;
  std::chrono::milliseconds max_retry_time{60000};
  // Backoff before attempt n (n >= 2) is uniform in [0, min(max, base * 2^(n-2))]
  // ("full jitter"): many clients throttled together spread out.
  std::chrono::milliseconds base_backoff{200};
  std::chrono::milliseconds max_backoff{10000};
  bool verify_tls = true;
};

using S3Metadata = std::map<std::string, std::string>; // user metadata, names lower-case without x-amz-meta-

enum class IfExists { overwrite, keep }; // keep: If-None-Match: * (create only)
// not_matched: an If-Match PUT found another object there, or none.
enum class PutOutcome { written, already_exists, not_matched };

struct S3PutOptions {
  S3Metadata metadata{};
  IfExists if_exists = IfExists::overwrite;
  // Not empty: If-Match, written only over the object of this ETag (AWS S3,
  // the RADOS Gateway, MinIO). A server that answers it 501 Not
  // Implemented is sent the PUT again without it.
  std::string if_match{};
};

struct S3ObjectHead {
  std::uint64_t size = 0;
  Time modified;
  std::string etag;
  S3Metadata metadata;
};

struct S3ListRequest {
  std::string prefix{};
  std::string delimiter{};          // "" for a flat listing
  std::string continuation_token{}; // "" for the first page
  int max_keys = 1000;            // S3 returns at most 1000 a page anyway
};

class S3Client {
public:
  [[nodiscard]] static Result<std::unique_ptr<S3Client>> create(S3Config config, S3ClientOptions options = {});
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  [[nodiscard]] const S3Config& config() const { return config_; }
  // The URL an object is fetched from (for messages and tests).
  [[nodiscard]] std::string object_url(std::string_view bucket, std::string_view key) const;

  [[nodiscard]] Result<PutOutcome> put_object(std::string_view bucket, std::string_view key, std::string_view bytes,
                                              const S3PutOptions& options = {});
  // Streams a local file from disk.
  [[nodiscard]] Result<PutOutcome> put_file(std::string_view bucket, std::string_view key,
                                            const std::filesystem::path& local, const S3PutOptions& options = {});
  // The whole object; nothing when absent; fails past max_bytes.
  [[nodiscard]] Result<std::optional<std::string>> get_object(std::string_view bucket, std::string_view key,
                                                              std::uint64_t max_bytes);
  // Streams the object to `local` (written to a temp name, then renamed):
  // false when absent.
  [[nodiscard]] Result<bool> get_file(std::string_view bucket, std::string_view key, const std::filesystem::path& local);
  [[nodiscard]] Result<std::optional<S3ObjectHead>> head_object(std::string_view bucket, std::string_view key);
  // One page.
  [[nodiscard]] Result<S3ListPage> list_objects_v2(std::string_view bucket, const S3ListRequest& request);
  // Whether `bucket` can be listed under `prefix` with these credentials:
  // one LIST of at most one key, its refusal told apart by kind (Reach).
  [[nodiscard]] Probe probe(std::string_view bucket, std::string_view prefix);
  // Every page, concatenated (continuation_token of the request is ignored).
  [[nodiscard]] Result<S3ListPage> list_all(std::string_view bucket, S3ListRequest request);
  // An absent key is fine (S3 says so too).
  [[nodiscard]] Status delete_object(std::string_view bucket, std::string_view key);
  // Server-side copy within a bucket; with `metadata`, the copy gets it
  // instead of the source's (to key == source_key: update metadata in place).
  [[nodiscard]] Status copy_object(std::string_view bucket, std::string_view source_key, std::string_view key,
                                   const std::optional<S3Metadata>& metadata = std::nullopt);

  // Attempts the last operation made (1 when it needed no retry).
  [[nodiscard]] int last_attempts() const { return last_attempts_; }

  struct Request;

private:
  S3Client(S3Config config, S3ClientOptions options, void* curl);
  struct Response;
  Result<Response> perform(Request& request);
  // Renews temporary credentials (S3Config::renew_credentials) when they
  // expire within kRenewBefore, or at once with `refused` (a request the
  // server refused for an expired token): true when they were renewed. A
  // failed renewal keeps the old keys and is not tried again for a while.
  bool renew_credentials(bool refused);

  S3Config config_;
  S3ClientOptions options_;
  void* curl_;
  int last_attempts_ = 0;
  std::chrono::steady_clock::time_point renewal_failed_at_{};
};

} // namespace npc::storage
