// An entry's results published under its lock (entry.hpp): a NEFF, a
// failure, a killed attempt's record, or a whole entry brought from
// elsewhere; each written so that a reader sees all of it or none.

#include <npc/cache/entry.hpp>

#include <cerrno>
#include <sys/stat.h>

#include <spdlog/spdlog.h>

#include <npc/cache/listing.hpp>
#include <npc/cache/publish.hpp>
#include <npc/cache/store.hpp>
#include <npc/storage/local.hpp>
#include <npc/util/error.hpp>
#include <npc/util/sha256.hpp>
#include <npc/util/strings.hpp>

namespace npc::cache {

EntryMeta Entry::record_or_empty() const {
  auto meta = read_entry_meta(dir_);
  return meta ? std::move(*meta) : EntryMeta{};
}

Status Entry::publish_neff(const fs::path& neff, const std::string& sha256, std::uint64_t bytes,
                           EntryMeta record) const {
  record.neff_sha256 = sha256;
  record.neff_bytes = bytes;
  EntryResult result;
  result.neff = neff;
  result.record = serialize_entry_meta(record);
  if (auto s = publish_result(*storage_, key_, result); !s) return s;
  return touch();
}

Status Entry::publish_success(const fs::path& neff, const AttemptRecord& attempt) const {
  auto digest = util::sha256_file(neff);
  if (!digest) return fail(digest.error());
  EntryMeta record = record_or_empty();
  std::error_code ec;
  record.graph_bytes = fs::file_size(graph_path(), ec);
  if (ec) record.graph_bytes = 0;
  record.attempts.push_back(attempt);
  // The compiler chose the NEFF's mode; the cache's is 0666 less the umask,
  // like every other file in it (group-writable in a shared cache).
  std::ignore = ::chmod(neff.c_str(), 0666 & ~util::process_umask());
  return publish_neff(neff, digest->sha256, digest->size, std::move(record));
}

Status Entry::publish_failure(const fs::path& log, const AttemptRecord& attempt) const {
  EntryMeta record = record_or_empty();
  record.attempts.push_back(attempt);
  EntryResult result;
  result.log = log;
  result.record = serialize_entry_meta(record);
  if (auto s = publish_result(*storage_, key_, result); !s) return s;
  return touch();
}

Status Entry::record_killed(const fs::path& log, const AttemptRecord& attempt) const {
  EntryMeta record = record_or_empty();
  record.attempts.push_back(attempt);
  if (auto s = status_of(storage_->write(key_of(kMetaFile), serialize_entry_meta(record), storage::IfPresent::replace)); !s) return s;
  auto kept = storage_->write(key_of(kKilledLogFile), storage::Body::file(log), storage::IfPresent::replace);
  if (!kept) return fail("cannot keep the log: " + kept.error());
  return ok_status();
}

Status Entry::publish_incoming(const IncomingEntry& incoming) const {
  EntryMeta record = record_or_empty();
  record.attempts.insert(record.attempts.end(), incoming.attempts.begin(), incoming.attempts.end());
  // The graph there, or the one coming: the same bytes, by the key.
  std::error_code ec;
  record.graph_bytes = fs::file_size(graph_path(), ec);
  if (ec && incoming.graph) record.graph_bytes = fs::file_size(*incoming.graph, ec);
  if (ec) record.graph_bytes = 0;
  EntryResult result;
  result.graph = incoming.graph;
  result.flags = incoming.flags;
  if (incoming.neff) {
    record.neff_sha256 = incoming.neff_sha256;
    record.neff_bytes = incoming.neff_bytes;
    result.neff = incoming.neff;
  } else if (incoming.log) {
    record.neff_sha256.reset();
    record.neff_bytes.reset();
    result.log = incoming.log;
  }
  if (result.neff || result.log) result.record = serialize_entry_meta(record);
  if (auto s = publish_result(*storage_, key_, result); !s) return s;
  return touch();
}

Status Entry::demote() const { return demote_result(*storage_, key_); }

Status Entry::clear_failure() const {
  return storage_->remove(key_of(kLogFile));
}

} // namespace npc::cache
