#include <npc/storage/s3_url.hpp>

namespace npc::storage {

namespace {

constexpr std::string_view kScheme = "s3://";
// S3's limits on bucket names.
constexpr std::size_t kMinBucketLength = 3;
constexpr std::size_t kMaxBucketLength = 63;

bool lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

bool unreserved(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
         c == '.' || c == '~';
}

} // namespace

Result<S3Location> parse_s3_url(std::string_view url) {
  if (url.substr(0, kScheme.size()) != kScheme)
    return fail("S3 URL '" + std::string(url) + "' does not start with s3:// (write s3://BUCKET/PREFIX)");
  std::string_view rest = url.substr(kScheme.size());
  std::size_t slash = rest.find('/');
  std::string_view bucket = rest.substr(0, slash);
  std::string_view prefix = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
  if (bucket.empty()) return fail("S3 URL '" + std::string(url) + "' names no bucket (write s3://BUCKET/PREFIX)");
  if (bucket.size() < kMinBucketLength || bucket.size() > kMaxBucketLength)
    return fail("S3 bucket name '" + std::string(bucket) + "' in " + std::string(url) + " must be 3 to 63 characters long");
  for (char c : bucket) {
    if (!lower_alnum(c) && c != '.' && c != '-')
      return fail("S3 bucket name '" + std::string(bucket) + "' in " + std::string(url) +
                  " may only hold a-z, 0-9, '.' and '-'");
  }
  if (!lower_alnum(bucket.front()) || !lower_alnum(bucket.back()))
    return fail("S3 bucket name '" + std::string(bucket) + "' in " + std::string(url) +
                " must start and end with a letter or digit");
  for (char c : prefix) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
      return fail("S3 URL '" + std::string(url) + "' holds a control character in its prefix");
  }
  if (prefix.find("//") != std::string_view::npos)
    return fail("S3 URL '" + std::string(url) + "' has an empty folder name ('//') in its prefix");
  return S3Location{std::string(bucket), std::string(prefix)};
}

std::string s3_uri_encode(std::string_view text, EncodeSlash slash) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (unreserved(c) || (c == '/' && slash == EncodeSlash::no)) {
      out += c;
    } else {
      auto byte = static_cast<unsigned char>(c);
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  return out;
}

} // namespace npc::storage
