#pragma once
// What S3Client's operations (s3_client.cpp) and its transport
// (s3_transport.cpp: one request over libcurl, signed, retried) share: a
// request as the operations describe it, and the answer the transport
// gives back. Only those two files include it.

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <npc/storage/s3_client.hpp>
#include <npc/storage/s3_config.hpp>

namespace npc::storage {

// Where a response's body goes, and what the request timeout bounds: types
// of S3Client::Request's members.
enum class SinkKind { memory, file, none };
enum class AttemptBound { whole_attempt, stall_only };

// SHA-256 of no bytes: the payload hash of a request without a body.
inline constexpr const char* kEmptyPayloadHash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

struct S3Client::Request {
  Request(std::string action_, std::string method_, std::string_view bucket_, std::string_view key_)
      : action(std::move(action_)), method(std::move(method_)), bucket(bucket_), key(key_) {}
  std::string action; // S3's name for it, for messages: "PutObject"
  std::string method;
  std::string bucket;
  std::string key;
  std::string query;
  std::vector<std::string> headers;
  std::string payload_hash = kEmptyPayloadHash;
  bool upload = false;
  std::string_view body;
  int body_fd = -1;
  std::uint64_t body_size = 0;
  SinkKind sink = SinkKind::none;
  std::uint64_t max_bytes = 0;
  int sink_fd = -1;
  // Whether S3ClientOptions::request_timeout bounds each attempt; a file
  // streamed either way, or a server-side copy of a big object, is bounded
  // by the low-speed limit only.
  AttemptBound bound = AttemptBound::whole_attempt;
};

struct S3Client::Response {
  long status = 0;
  std::string body; // the 2xx body in memory, else the error body
  std::map<std::string, std::string> headers;
};

// "s3://bucket/key", as messages name an object.
[[nodiscard]] std::string s3_target(std::string_view bucket, std::string_view key);
// The server a request to `bucket` goes to, as messages name it.
[[nodiscard]] std::string endpoint_name(const S3Config& config, std::string_view bucket);

} // namespace npc::storage
