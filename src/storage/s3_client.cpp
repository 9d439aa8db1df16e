// S3Client's operations: each an S3 request described (s3_request.hpp) and
// its answer read; how a request travels is s3_transport.cpp's.

#include <npc/storage/s3_client.hpp>
#include <npc/storage/s3_request.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include <spdlog/spdlog.h>

#include <npc/storage/curl_library.hpp>
#include <npc/storage/s3_url.hpp>
#include <npc/util/fs.hpp>
#include <npc/util/sha256.hpp>

namespace npc::storage {

namespace {

// A copy answers with a short XML document (which may hold an error).
constexpr std::uint64_t kMaxCopyResponse = 1024 * 1024;

std::string query_of(const std::vector<std::pair<std::string, std::string>>& sorted_params) {
  // Sorted by name and encoded once: that is the canonical query string
  // SigV4 signs, and libcurl signs the query exactly as given.
  std::string query;
  for (const auto& [name, value] : sorted_params) {
    if (!query.empty()) query += '&';
    query += s3_uri_encode(name, EncodeSlash::yes) + "=" + s3_uri_encode(value, EncodeSlash::yes);
  }
  return query;
}

bool valid_metadata(const S3Metadata& metadata, std::string& bad) {
  for (const auto& [name, value] : metadata) {
    bool ok = !name.empty();
    for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_');
    for (char c : value) ok = ok && c >= 0x20 && c < 0x7f;
    if (!ok) {
      bad = name;
      return false;
    }
  }
  return true;
}

} // namespace

namespace {

std::string http_error(const std::string& action, const std::string& bucket, const std::string& target,
                       const std::string& endpoint, long status, const std::string& body, int attempts) {
  S3ErrorBody error = parse_s3_error(body);
  std::string code = error.code.empty() ? std::to_string(status) : std::to_string(status) + " " + error.code;
  std::string tail = attempts > 1 ? " (after " + std::to_string(attempts) + " attempts)" : "";
  // A wrong key or secret is not a missing permission: say which it is.
  if (status == 403 && (error.code == "SignatureDoesNotMatch" || error.code == "InvalidAccessKeyId"))
    return "S3 refused the credentials for " + action + " on " + target + " at " + endpoint + " (" + code +
           "): the access key or the secret key is wrong (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_PROFILE)" +
           tail;
  if (status == 403)
    return "S3 denied " + action + " on " + target + " (" + code + "): check the credentials' permissions" + tail;
  if (status == 404 && error.code == "NoSuchBucket")
    return "S3 bucket " + bucket + " does not exist at " + endpoint + " (404 NoSuchBucket)";
  // The endpoint too: with a custom one, which server throttled or failed.
  return "S3 " + action + " on " + target + " at " + endpoint + " failed (" + code + (error.message.empty() ? "" : ": " + error.message) +
         ")" + tail;
}

} // namespace

#define NPC_S3_FAIL(request, response)                                                                                 \
  fail(http_error((request).action, (request).bucket, s3_target((request).bucket, (request).key),                       \
                  endpoint_name(config_, (request).bucket), (response).status, (response).body, last_attempts_))

namespace {

std::vector<std::string> put_headers(const S3PutOptions& options) {
  std::vector<std::string> headers{"Content-Type: application/octet-stream"};
  for (const auto& [name, value] : options.metadata) headers.push_back("x-amz-meta-" + name + ": " + value);
  if (options.if_exists == IfExists::keep) headers.emplace_back("If-None-Match: *");
  if (!options.if_match.empty()) headers.push_back("If-Match: " + options.if_match);
  return headers;
}

} // namespace

Result<PutOutcome> S3Client::put_object(std::string_view bucket, std::string_view key, std::string_view bytes,
                                        const S3PutOptions& options) {
  std::string bad;
  if (!valid_metadata(options.metadata, bad))
    return fail("S3 metadata '" + bad + "' for " + s3_target(bucket, key) +
                " must be a lower-case name (a-z 0-9 - _) with a printable ASCII value");
  Request request("PutObject", "PUT", bucket, key);
  request.headers = put_headers(options);
  request.payload_hash = util::sha256_hex(bytes);
  request.upload = true;
  request.body = bytes;
  request.body_size = bytes.size();
  auto response = perform(request);
  if (!response) return fail(response.error());
  if (response->status == 412 && options.if_exists == IfExists::keep) return PutOutcome::already_exists;
  if (!options.if_match.empty()) {
    // 412: another object; 404: none (AWS); 409: a write of it meanwhile.
    if (response->status == 412 || response->status == 404 || response->status == 409) return PutOutcome::not_matched;
    if (response->status == 501) {
      S3PutOptions plain = options;
      plain.if_match.clear();
      return put_object(bucket, key, bytes, plain);
    }
  }
  if (response->status != 200) return NPC_S3_FAIL(request, *response);
  return PutOutcome::written;
}

Result<PutOutcome> S3Client::put_file(std::string_view bucket, std::string_view key, const std::filesystem::path& local,
                                      const S3PutOptions& options) {
  std::string bad;
  if (!valid_metadata(options.metadata, bad))
    return fail("S3 metadata '" + bad + "' for " + s3_target(bucket, key) +
                " must be a lower-case name (a-z 0-9 - _) with a printable ASCII value");
  util::UniqueFd fd(::open(local.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return fail(util::errno_text("cannot open", local, errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return fail(util::errno_text("cannot stat", local, errno));
  // Hashing first would read the file twice; TLS already guards the bytes
  // in transit, so the payload is left unsigned.
  Request request("PutObject", "PUT", bucket, key);
  request.headers = put_headers(options);
  request.payload_hash = "UNSIGNED-PAYLOAD";
  request.upload = true;
  request.body_fd = fd.get();
  request.body_size = static_cast<std::uint64_t>(st.st_size);
  request.bound = AttemptBound::stall_only; // a NEFF of hundreds of MB takes what it takes
  auto response = perform(request);
  if (!response) return fail(response.error());
  if (response->status == 412 && options.if_exists == IfExists::keep) return PutOutcome::already_exists;
  if (response->status != 200) return NPC_S3_FAIL(request, *response);
  return PutOutcome::written;
}

Result<std::optional<std::string>> S3Client::get_object(std::string_view bucket, std::string_view key,
                                                        std::uint64_t max_bytes) {
  Request request("GetObject", "GET", bucket, key);
  request.sink = SinkKind::memory;
  request.max_bytes = max_bytes;
  auto response = perform(request);
  if (!response) return fail(response.error());
  if (response->status == 404 && parse_s3_error(response->body).code != "NoSuchBucket")
    return std::optional<std::string>{};
  if (response->status != 200) return NPC_S3_FAIL(request, *response);
  return std::optional<std::string>(std::move(response->body));
}

Result<bool> S3Client::get_file(std::string_view bucket, std::string_view key, const std::filesystem::path& local) {
  util::AtomicFile out(local);
  if (auto s = out.open(); !s) return fail(s.error());
  Request request("GetObject", "GET", bucket, key);
  request.sink = SinkKind::file;
  request.sink_fd = out.fd();
  request.bound = AttemptBound::stall_only; // a NEFF of hundreds of MB takes what it takes
  auto response = perform(request);
  if (!response) return fail(response.error());
  if (response->status == 404 && parse_s3_error(response->body).code != "NoSuchBucket") return false;
  if (response->status != 200) return NPC_S3_FAIL(request, *response);
  if (auto s = out.commit(); !s) return fail(s.error());
  return true;
}

Result<std::optional<S3ObjectHead>> S3Client::head_object(std::string_view bucket, std::string_view key) {
  Request request("HeadObject", "HEAD", bucket, key);
  auto response = perform(request);
  if (!response) return fail(response.error());
  // A HEAD answer has no body: a missing bucket looks like a missing key.
  if (response->status == 404) return std::optional<S3ObjectHead>{};
  if (response->status != 200) return NPC_S3_FAIL(request, *response);
  S3ObjectHead head;
  const auto& h = response->headers;
  if (auto it = h.find("content-length"); it != h.end()) head.size = std::stoull(it->second);
  if (auto it = h.find("last-modified"); it != h.end()) {
    std::time_t when = curl_library().getdate(it->second.c_str(), nullptr);
    if (when >= 0) head.modified = std::chrono::system_clock::from_time_t(when);
  }
  if (auto it = h.find("etag"); it != h.end()) head.etag = it->second;
  constexpr std::string_view kMetaPrefix = "x-amz-meta-";
  for (const auto& [name, value] : h)
    if (name.substr(0, kMetaPrefix.size()) == kMetaPrefix) head.metadata[name.substr(kMetaPrefix.size())] = value;
  return std::optional<S3ObjectHead>(std::move(head));
}

namespace {

S3Client::Request list_request(std::string_view bucket, const S3ListRequest& list) {
  std::vector<std::pair<std::string, std::string>> params;
  if (!list.continuation_token.empty()) params.emplace_back("continuation-token", list.continuation_token);
  if (!list.delimiter.empty()) params.emplace_back("delimiter", list.delimiter);
  params.emplace_back("list-type", "2");
  params.emplace_back("max-keys", std::to_string(list.max_keys));
  if (!list.prefix.empty()) params.emplace_back("prefix", list.prefix);
  S3Client::Request request("ListObjectsV2", "GET", bucket, "");
  request.query = query_of(params);
  request.sink = SinkKind::memory;
  // A page of 1000 keys of 1 KiB each, with its XML, stays well below this.
  request.max_bytes = 16 * 1024 * 1024;
  return request;
}

// What a refused request says of the storage as a whole.
Reach reach_of(long status, const std::string& error_code) {
  if (status == 403 && (error_code == "SignatureDoesNotMatch" || error_code == "InvalidAccessKeyId"))
    return Reach::credentials_refused;
  if (status == 403) return Reach::access_denied;
  if (status == 404 && error_code == "NoSuchBucket") return Reach::missing;
  return Reach::failed;
}

} // namespace

Probe S3Client::probe(std::string_view bucket, std::string_view prefix) {
  Request request = list_request(bucket, {.prefix = std::string(prefix), .max_keys = 1});
  auto response = perform(request);
  // No HTTP answer at all, after the retries: the endpoint or the network.
  if (!response) return {Reach::unreachable, response.error()};
  if (response->status == 200) return {};
  request.key = prefix;
  Result<S3ListPage> refused = NPC_S3_FAIL(request, *response);
  return {reach_of(response->status, parse_s3_error(response->body).code), refused.error()};
}

Result<S3ListPage> S3Client::list_objects_v2(std::string_view bucket, const S3ListRequest& list) {
  Request request = list_request(bucket, list);
  auto response = perform(request);
  if (!response) return fail(response.error());
  if (response->status != 200) {
    request.key = list.prefix;
    return NPC_S3_FAIL(request, *response);
  }
  return parse_list_objects_v2(response->body);
}

Result<S3ListPage> S3Client::list_all(std::string_view bucket, S3ListRequest request) {
  S3ListPage all;
  request.continuation_token.clear();
  for (;;) {
    auto page = list_objects_v2(bucket, request);
    if (!page) return page;
    for (auto& o : page->objects) all.objects.push_back(std::move(o));
    for (auto& p : page->common_prefixes) all.common_prefixes.push_back(std::move(p));
    if (!page->continuation_token) return all;
    request.continuation_token = std::move(*page->continuation_token);
  }
}

Status S3Client::delete_object(std::string_view bucket, std::string_view key) {
  Request request("DeleteObject", "DELETE", bucket, key);
  auto response = perform(request);
  if (!response) return fail(response.error());
  if (response->status != 204 && response->status != 200) return NPC_S3_FAIL(request, *response);
  return ok_status();
}

Status S3Client::copy_object(std::string_view bucket, std::string_view source_key, std::string_view key,
                             const std::optional<S3Metadata>& metadata) {
  std::vector<std::string> headers{"x-amz-copy-source: /" + std::string(bucket) + "/" +
                                   s3_uri_encode(source_key, EncodeSlash::no)};
  if (metadata) {
    std::string bad;
    if (!valid_metadata(*metadata, bad))
      return fail("S3 metadata '" + bad + "' for " + s3_target(bucket, key) +
                  " must be a lower-case name (a-z 0-9 - _) with a printable ASCII value");
    headers.emplace_back("x-amz-metadata-directive: REPLACE");
    headers.emplace_back("Content-Type: application/octet-stream");
    for (const auto& [name, value] : *metadata) headers.push_back("x-amz-meta-" + name + ": " + value);
  }
  Request request("CopyObject", "PUT", bucket, key);
  request.headers = std::move(headers);
  request.upload = true;
  request.sink = SinkKind::memory;
  request.max_bytes = kMaxCopyResponse;
  // S3 copies before it answers: the time grows with the object's size.
  request.bound = AttemptBound::stall_only;
  auto response = perform(request);
  if (!response) return fail(response.error());
  // A copy can fail after S3 has sent 200: the error is then in the body.
  S3ErrorBody error = parse_s3_error(response->body);
  if (response->status != 200 || !error.code.empty()) return NPC_S3_FAIL(request, *response);
  return ok_status();
}

#undef NPC_S3_FAIL

} // namespace npc::storage
