#pragma once
// Naming objects in S3: `s3://bucket/prefix` as users write it, and the
// percent-encoding S3 expects in paths and query strings.

#include <string>
#include <string_view>

#include <npc/util/result.hpp>

namespace npc::storage {

struct S3Location {
  std::string bucket;
  std::string prefix; // without a leading '/'; "" for the whole bucket
};

// Parses "s3://bucket" or "s3://bucket/some/prefix". The bucket must follow
// S3's naming rules (3 to 63 of a-z, 0-9, '.', '-', starting and ending with
// a letter or digit), so that a typo fails here and not as a 404 later.
[[nodiscard]] Result<S3Location> parse_s3_url(std::string_view url);

enum class EncodeSlash { no, yes };
// Percent-encodes everything but the unreserved characters (A-Z a-z 0-9
// - _ . ~) and, with EncodeSlash::no, '/': S3 signs the path encoded once
// this way, so "a b+c" must travel as "a%20b%2Bc".
[[nodiscard]] std::string s3_uri_encode(std::string_view text, EncodeSlash slash);

} // namespace npc::storage
