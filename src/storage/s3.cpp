#include <npc/storage/s3.hpp>

#include <algorithm>
#include <cerrno>
#include <unistd.h>

#include <spdlog/spdlog.h>

#include <npc/util/fs.hpp>

namespace npc::storage {

namespace fs = std::filesystem;

namespace {

std::string join(std::string_view dir, std::string_view name) {
  if (dir.empty()) return std::string(name);
  return std::string(dir) + "/" + std::string(name);
}

// The caller keeps a local file it could not place, to try again; once the
// object is in S3 the file is only a leftover, not worth failing for.
void remove_placed(const fs::path& local) {
  if (::unlink(local.c_str()) != 0 && errno != ENOENT) spdlog::warn("{}", util::errno_text("cannot remove", local, errno));
}

} // namespace

Result<std::unique_ptr<S3Storage>> S3Storage::open(std::string_view url, const EnvLookup& env, S3ClientOptions options) {
  auto location = parse_s3_url(url);
  if (!location) return fail(location.error());
  auto config = load_s3_config(env);
  if (!config) return fail(config.error());
  auto client = S3Client::create(std::move(*config), options);
  if (!client) return fail(client.error());
  return std::make_unique<S3Storage>(std::move(*client), std::move(*location));
}

Result<std::vector<std::unique_ptr<S3Storage>>> S3Storage::open_many(std::string_view url, std::size_t count,
                                                                       const EnvLookup& env, S3ClientOptions options,
                                                                       std::shared_ptr<Learned> learned) {
  auto location = parse_s3_url(url);
  if (!location) return fail(location.error());
  auto config = load_s3_config(env);
  if (!config) return fail(config.error());
  if (!learned) learned = std::make_shared<Learned>();
  std::vector<std::unique_ptr<S3Storage>> storages;
  for (std::size_t i = 0; i < count; ++i) {
    auto client = S3Client::create(*config, options);
    if (!client) return fail(client.error());
    storages.push_back(std::make_unique<S3Storage>(std::move(*client), *location, learned));
  }
  return storages;
}

namespace {

// A trailing '/' of the prefix is dropped: "p/" and "p" are one folder.
S3Location without_trailing_slash(S3Location location) {
  while (!location.prefix.empty() && location.prefix.back() == '/') location.prefix.pop_back();
  return location;
}

std::string url_of(const S3Location& location) {
  return "s3://" + location.bucket + (location.prefix.empty() ? "" : "/" + location.prefix);
}

} // namespace

S3Storage::S3Storage(std::unique_ptr<S3Client> client, S3Location location, std::shared_ptr<Learned> learned)
    : Storage(url_of(without_trailing_slash(location)), learned ? std::move(learned) : std::make_shared<Learned>()),
      client_(std::move(client)), location_(without_trailing_slash(std::move(location))) {}

std::string S3Storage::object_key(std::string_view key) const {
  if (location_.prefix.empty()) return std::string(key);
  if (key.empty()) return location_.prefix;
  return location_.prefix + "/" + std::string(key);
}

std::string S3Storage::folder_prefix(std::string_view dir) const {
  std::string key = object_key(dir);
  // The '/' keeps MODULE_1 from taking in MODULE_10's objects.
  return key.empty() ? key : key + "/";
}

Result<S3ListPage> S3Storage::list_under(std::string_view dir, std::string delimiter) const {
  return client_->list_all(location_.bucket, {.prefix = folder_prefix(dir), .delimiter = std::move(delimiter)});
}

Result<std::vector<std::string>> S3Storage::list(std::string_view dir) const {
  std::lock_guard lock(mutex_);
  // With the delimiter S3 folds everything deeper into one common prefix
  // per subfolder, so a version folder with thousands of entries of many
  // files each lists in a page per 1000 entries, not per 1000 files.
  auto page = list_under(dir, "/");
  if (!page) return fail(page.error());
  std::size_t skip = folder_prefix(dir).size();
  std::vector<std::string> names;
  for (const auto& object : page->objects) {
    // "dir/" itself is the empty object some consoles make for a folder.
    if (object.key.size() > skip) names.push_back(object.key.substr(skip));
  }
  for (const auto& prefix : page->common_prefixes) {
    if (prefix.size() > skip + 1) names.push_back(prefix.substr(skip, prefix.size() - skip - 1));
  }
  std::sort(names.begin(), names.end());
  return names;
}

Result<std::vector<TreeFile>> S3Storage::list_tree(std::string_view dir) const {
  std::lock_guard lock(mutex_);
  // No delimiter: every object below, 1000 to a page, with the size and
  // LastModified a whole-cache listing needs (no HEAD per object).
  auto page = list_under(dir, "");
  if (!page) return fail(page.error());
  std::size_t skip = folder_prefix(dir).size();
  std::vector<TreeFile> files;
  files.reserve(page->objects.size());
  for (const auto& object : page->objects) {
    // Keys ending in '/' are the empty objects some consoles make for folders.
    if (object.key.size() <= skip || object.key.back() == '/') continue;
    std::string key = object.key.substr(skip);
    const auto slash = key.rfind('/');
    const std::string_view name = std::string_view(key).substr(slash == std::string::npos ? 0 : slash + 1);
    const bool folder_time = name == kS3FolderTimeFile;
    files.push_back({std::move(key), object.size, object.modified, folder_time});
  }
  std::sort(files.begin(), files.end(), [](const TreeFile& a, const TreeFile& b) { return a.key < b.key; });
  return files;
}

Result<std::optional<ObjectInfo>> S3Storage::stat(std::string_view key) const {
  std::lock_guard lock(mutex_);
  // An object and a folder of the same name can both exist in S3 (a key
  // "a" beside "a/b"); the object wins, as it is what read() would return.
  // The root is only ever a folder (an object named like the prefix is not it).
  if (!key.empty()) {
    auto head = client_->head_object(location_.bucket, object_key(key));
    if (!head) return fail(head.error());
    if (*head) return std::optional<ObjectInfo>(ObjectInfo{(*head)->size, (*head)->modified, false});
  }
  // A folder exists while something is under it: one key is enough to know.
  auto page = client_->list_objects_v2(location_.bucket, {.prefix = folder_prefix(key), .max_keys = 1});
  if (!page) return fail(page.error());
  if (page->objects.empty()) return std::optional<ObjectInfo>{};
  // A folder has no time of its own; that of the object found is as good
  // as any (an entry's age comes from a listing of its files).
  return std::optional<ObjectInfo>(ObjectInfo{0, page->objects.front().modified, true});
}

Result<bool> S3Storage::read(std::string_view key, const Into& into) const {
  std::lock_guard lock(mutex_);
  if (const fs::path* local = into.file()) return client_->get_file(location_.bucket, object_key(key), *local);
  auto bytes = client_->get_object(location_.bucket, object_key(key), into.max_bytes());
  if (!bytes) return fail(bytes.error());
  if (!*bytes) return false;
  *into.memory() = std::move(**bytes);
  return true;
}

Result<bool> S3Storage::write(std::string_view key, const Body& body, IfPresent if_present) {
  if (const fs::path* local = body.file()) return put_file(*local, key, if_present);
  return put_bytes(key, body.bytes(), if_present);
}

Result<bool> S3Storage::put_bytes(std::string_view key, std::string_view bytes, IfPresent if_present) {
  std::lock_guard lock(mutex_);
  // S3 makes a PUT visible whole or not at all: no temp name is needed.
  if (if_present == IfPresent::replace) {
    auto put = client_->put_object(location_.bucket, object_key(key), bytes);
    if (!put) return fail(put.error());
    return true;
  }
  // The HEAD first: on a server that ignores If-None-Match, a creator that
  // comes after the first one (the usual case, not a race) then leaves the
  // first content as it is. The conditional PUT then decides real races on
  // AWS S3; where the header is ignored, racers that all passed the HEAD
  // all "win" and the last PUT's bytes stay (whole: a PUT is atomic).
  // Once probe() found the condition honoured, the PUT alone decides.
  if (!exclusive_create_is_exact()) {
    auto head = client_->head_object(location_.bucket, object_key(key));
    if (!head) return fail(head.error());
    if (*head) return false;
  }
  auto put = client_->put_object(location_.bucket, object_key(key), bytes, {.if_exists = IfExists::keep});
  if (!put) return fail(put.error());
  return *put == PutOutcome::written;
}

Result<bool> S3Storage::learn_exclusive_create() const {
  const std::string probe = object_key(".npc/create-probe/" + util::unique_suffix());
  bool honoured = false;
  for (int round = 0; round < 2; ++round) {
    auto put = client_->put_object(location_.bucket, probe, "probe\n", {.if_exists = IfExists::keep});
    if (!put) {
      std::ignore = client_->delete_object(location_.bucket, probe);
      return fail(put.error());
    }
    // The first must write (nothing was there); the second must be refused.
    if (round == 0 && *put != PutOutcome::written) break;
    honoured = round == 1 && *put == PutOutcome::already_exists;
  }
  if (auto s = client_->delete_object(location_.bucket, probe); !s)
    spdlog::debug("cannot remove the probe s3://{}/{}: {}", location_.bucket, probe, s.error());
  learned()->exclusive_create_exact = honoured;
  return honoured;
}

Result<bool> S3Storage::put_file(const fs::path& local, std::string_view key, IfPresent if_present) {
  std::lock_guard lock(mutex_);
  // Streamed from disk (a NEFF can be hundreds of MiB); the upload is
  // visible only once complete, so readers see the old object or the new.
  // Create-only, the HEAD first as for write, which also saves uploading a
  // large file that would be refused (or, where If-None-Match is ignored,
  // replace an existing object with the same result of a compile).
  S3PutOptions options;
  if (if_present == IfPresent::keep) {
    auto head = client_->head_object(location_.bucket, object_key(key));
    if (!head) return fail(head.error());
    if (*head) {
      remove_placed(local);
      return false;
    }
    options.if_exists = IfExists::keep;
  }
  auto put = client_->put_file(location_.bucket, object_key(key), local, options);
  if (!put) return fail(put.error());
  remove_placed(local);
  return *put == PutOutcome::written;
}

Probe S3Storage::probe() const {
  std::lock_guard lock(mutex_);
  Probe probe = client_->probe(location_.bucket, folder_prefix(""));
  if (probe.reach != Reach::usable) return probe;
  auto exact = learn_exclusive_create();
  if (!exact)
    spdlog::debug("cannot tell whether {} honours create-only writes: {}", describe(), exact.error());
  else spdlog::debug("{} {} create-only writes", describe(), *exact ? "honours" : "ignores");
  return probe;
}

Status S3Storage::remove(std::string_view key) {
  std::lock_guard lock(mutex_);
  return client_->delete_object(location_.bucket, object_key(key));
}

namespace {

// Whether `object` holds `bytes` now (false when absent or other).
Result<bool> object_holds(S3Client& client, const std::string& bucket, const std::string& object, std::string_view bytes) {
  auto found = client.get_object(bucket, object, bytes.size() + 1);
  if (found) return *found && **found == bytes;
  // Failed as bigger than what was read: not it.
  auto head = client.head_object(bucket, object);
  if (head && (!*head || (*head)->size != bytes.size())) return false;
  return fail(found.error());
}

} // namespace

// A removal compares, then removes: S3 has no delete-if-unchanged that
// every server honours (the RADOS Gateway ignores If-Match on a DELETE), and
// what changes within that window can be removed. A lock taken on S3 where
// exclusive create is not exact is read back (lock.hpp), which catches it.
// A replacement is sent If-Match the ETag of the object compared, where the
// server honours it (AWS S3, the RADOS Gateway, MinIO): of two writers that
// compared the same object, one replaces it and the other finds it changed,
// which is what lets one of several launchers take a stale lock over
// (storage/lock.hpp).
Result<bool> S3Storage::change_if_unchanged(std::string_view key, const Seen& seen,
                                            std::optional<std::string_view> replacement) {
  std::lock_guard lock(mutex_);
  const std::string object = object_key(key);
  std::string etag;
  if (seen.modified || replacement) {
    auto head = client_->head_object(location_.bucket, object);
    if (!head) return fail(head.error());
    if (!*head || (*head)->size != seen.bytes.size()) return false;
    if (seen.modified && (*head)->modified != *seen.modified) return false;
    etag = (*head)->etag;
  }
  auto same = object_holds(*client_, location_.bucket, object, seen.bytes);
  if (!same || !*same) return same;
  if (!replacement) {
    if (auto s = client_->delete_object(location_.bucket, object); !s) return fail(s.error());
    return true;
  }
  auto put = put_if_match(object, *replacement, etag);
  if (!put) return fail(put.error());
  return *put == PutOutcome::written;
}

Result<PutOutcome> S3Storage::put_if_match(const std::string& object, std::string_view bytes, const std::string& etag) {
  std::string bare = etag;
  if (bare.size() >= 2 && bare.front() == '"' && bare.back() == '"') bare = bare.substr(1, bare.size() - 2);
  const std::string quoted = "\"" + bare + "\"";
  auto put_with = [&](IfMatchForm form) {
    S3PutOptions options;
    if (form == IfMatchForm::quoted || form == IfMatchForm::unknown) options.if_match = quoted;
    if (form == IfMatchForm::bare) options.if_match = bare;
    return client_->put_object(location_.bucket, object, bytes, options);
  };
  if (bare.empty()) return put_with(IfMatchForm::unsupported); // no ETag to match
  auto put = put_with(if_match_form_);
  if (!put) return put;
  if (if_match_form_ != IfMatchForm::unknown) return put;
  if (*put == PutOutcome::written) {
    if_match_form_ = IfMatchForm::quoted;
    return put;
  }
  // Refused: another object is there now, or the server does not take the
  // quoted form. Only the object's ETag tells which.
  for (IfMatchForm next : {IfMatchForm::bare, IfMatchForm::unsupported}) {
    auto head = client_->head_object(location_.bucket, object);
    if (!head) return fail(head.error());
    if (!*head || (*head)->etag != etag) return PutOutcome::not_matched;
    put = put_with(next);
    if (!put) return put;
    if (*put == PutOutcome::written) {
      if_match_form_ = next;
      if (next == IfMatchForm::unsupported)
        spdlog::warn("the S3 server of s3://{} refuses If-Match in either form: a stale lock there is replaced "
                     "without it, and two launchers taking it over at once may both compile its graph",
                     location_.bucket);
      return put;
    }
  }
  return put;
}

Result<bool> S3Storage::remove_tree(std::string_view dir) {
  std::lock_guard lock(mutex_);
  std::string prefix = folder_prefix(dir);
  if (prefix.empty())
    return fail("refusing to remove every object of bucket " + location_.bucket + " (give the storage a prefix)");
  // S3 removes one object at a time: no order makes a folder vanish at
  // once (what must go first, the caller removes before).
  auto page = client_->list_all(location_.bucket, {.prefix = prefix});
  if (!page) return fail(page.error());
  if (page->objects.empty()) return false;
  for (const auto& object : page->objects) {
    if (auto s = client_->delete_object(location_.bucket, object.key); !s) return fail(s.error());
  }
  return true;
}

Status S3Storage::set_folder_time(std::string_view dir, Time when) {
  std::lock_guard lock(mutex_);
  // One PUT with no check that the folder exists: a hit has just read it,
  // and a marker left by a hit racing a removal is a folder without a graph,
  // which eviction removes like any other.
  auto seconds = std::chrono::floor<std::chrono::seconds>(when.time_since_epoch()).count();
  auto put = client_->put_object(location_.bucket, object_key(join(dir, kS3FolderTimeFile)), std::to_string(seconds));
  if (!put) return fail(put.error());
  return ok_status();
}

} // namespace npc::storage
