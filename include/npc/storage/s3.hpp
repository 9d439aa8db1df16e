#pragma once
// The storage backend of a cache in an S3 bucket, under a key prefix:
// s3://bucket/prefix holds one object per file, named as libneuronxla names
// them (<prefix>/neuronxcc-<version>/MODULE_.../<file>), so a cache written
// here is also a cache torch-neuronx can read.
//
// S3 has objects, not folders: a "folder" is a key prefix ending in '/' with
// objects under it, and exists exactly while it has some. What follows from
// that, operation by operation, is in s3.cpp; in short:
//  - writes are atomic per object (a single PUT), never across objects;
//  - create-only writes (IfPresent::keep) use If-None-Match: *, which
//    AWS S3 honours (of racing creators exactly one wins) and some
//    S3-compatible servers ignore (there they are best effort: two racing
//    creators can both win, the last one's bytes staying);
//  - remove_tree cannot remove a folder at once: readers may see part of
//    it (a cache removes an entry's model.done before, so that part is an
//    entry that is not done); of many processes removing one folder at
//    once, several may report true;
//  - a folder's time (set_folder_time: an entry's last use) is kept in an
//    object of its own, npc-last-use, whose time in a listing is the
//    folder's (its content, the unix seconds asked for, is for people
//    reading the bucket).
//
// One S3Storage may be shared between threads: its calls are serialised
// over its one connection. Threads that must not wait on each other open a
// storage each.

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <npc/storage/s3_client.hpp>
#include <npc/storage/s3_config.hpp>
#include <npc/storage/s3_url.hpp>
#include <npc/storage/storage.hpp>

namespace npc::storage {

// Ours, in a folder: its time (an entry's last use), as the unix seconds of
// the time, so that a time other than now is kept exactly ("npc-" files are
// ignored by torch-neuronx, as cache/layout.hpp says). The name is the one
// earlier releases wrote.
inline constexpr std::string_view kS3FolderTimeFile = "npc-last-use";

class S3Storage final : public Storage {
public:
  // `url` is s3://bucket or s3://bucket/prefix; where S3 is and who we are
  // comes from `env` (see s3_config.hpp).
  [[nodiscard]] static Result<std::unique_ptr<S3Storage>> open(std::string_view url,
                                                               const EnvLookup& env = process_environment(),
                                                               S3ClientOptions options = {});
  // `count` storages of one cache, a connection each, for threads that must
  // not wait on each other: the credentials are looked up once.
  // They share `learned` (a new one when none is given).
  [[nodiscard]] static Result<std::vector<std::unique_ptr<S3Storage>>> open_many(std::string_view url, std::size_t count,
                                                                                 const EnvLookup& env = process_environment(),
                                                                                 S3ClientOptions options = {},
                                                                                 std::shared_ptr<Learned> learned = {});
  // A trailing '/' of the prefix is dropped: "p/" and "p" are one folder.
  // What it learns of the server goes to `learned` (its own when none).
  S3Storage(std::unique_ptr<S3Client> client, S3Location location, std::shared_ptr<Learned> learned = {});

  [[nodiscard]] const S3Location& location() const { return location_; }
  // The object name of `key`: <prefix>/<key> ("" is the prefix itself).
  [[nodiscard]] std::string object_key(std::string_view key) const;

  [[nodiscard]] Result<std::vector<std::string>> list(std::string_view dir) const override;
  [[nodiscard]] Result<std::vector<TreeFile>> list_tree(std::string_view dir) const override;
  [[nodiscard]] Result<std::optional<ObjectInfo>> stat(std::string_view key) const override;
  using Storage::read;
  [[nodiscard]] Result<bool> read(std::string_view key, const Into& into) const override;
  [[nodiscard]] Result<bool> write(std::string_view key, const Body& body, IfPresent if_present) override;
  // A LIST of at most one key; then, once it answered, two create-only
  // PUTs of one probe object (under .npc/): the second refused (412) is a
  // server that honours If-None-Match, as AWS S3, the RADOS Gateway and
  // MinIO do; then a create-only write is one PUT, with no HEAD before it,
  // and a lock needs no read-back (storage/lock.hpp).
  [[nodiscard]] Probe probe() const override;
  [[nodiscard]] Status remove(std::string_view key) override;
  [[nodiscard]] Result<bool> change_if_unchanged(std::string_view key, const Seen& seen,
                                                 std::optional<std::string_view> replacement) override;
  [[nodiscard]] Result<bool> remove_tree(std::string_view dir) override;
  [[nodiscard]] Status set_folder_time(std::string_view dir, Time when) override;

private:
  [[nodiscard]] Result<bool> put_bytes(std::string_view key, std::string_view bytes, IfPresent if_present);
  // Streamed from the local file, which is removed once placed or refused.
  [[nodiscard]] Result<bool> put_file(const std::filesystem::path& local, std::string_view key,
                                      IfPresent if_present);
  // The probe's PUTs, with mutex_ held: whether the server honoured the
  // condition (also set in learned_).
  [[nodiscard]] Result<bool> learn_exclusive_create() const;
  // The listing prefix of a folder: "<prefix>/<dir>/", or "" for the root
  // of a storage without a prefix.
  [[nodiscard]] std::string folder_prefix(std::string_view dir) const;
  [[nodiscard]] Result<S3ListPage> list_under(std::string_view dir, std::string delimiter) const;
  // A PUT of `object` If-Match `etag` (as a HEAD gave it), in the form the
  // server takes; with mutex_ held.
  [[nodiscard]] Result<PutOutcome> put_if_match(const std::string& object, std::string_view bytes,
                                                const std::string& etag);

  std::unique_ptr<S3Client> client_;
  S3Location location_;
  // The client holds one connection and is not thread-safe.
  mutable std::mutex mutex_;
  // How the server takes If-Match, found out at the first replacement:
  // quoted as RFC 9110 has it (AWS S3), bare (the RADOS Gateway of Ceph 16
  // refuses the quoted form), or not at all (a refusal of both while the
  // object keeps that ETag: then replaced without it, as before conditional
  // writes). With mutex_ held.
  enum class IfMatchForm { unknown, quoted, bare, unsupported };
  IfMatchForm if_match_form_ = IfMatchForm::unknown;
};

} // namespace npc::storage
