#pragma once
// Copies many local files to S3 objects, or many objects to local files, a
// few at a time: what a bundle export or import, or a launcher pushing its
// results, needs. Each worker has a client (and so a connection) of its own,
// since a client is not thread-safe; the work is bounded by the number of
// workers, and the first failure stops the rest from starting new files.
//
// Uploads stream the file (UNSIGNED-PAYLOAD, read once); downloads are
// written to a temp name and renamed, as S3Client::get_file does.

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <npc/storage/s3_client.hpp>
#include <npc/storage/s3_config.hpp>
#include <npc/util/result.hpp>

namespace npc::storage {

struct S3TransferFile {
  std::filesystem::path local;
  std::string key; // the full object key in the bucket
};

struct S3TransferOptions {
  int concurrency = 4; // clients (connections) working at once; at least 1
  S3ClientOptions client{};
};

struct S3TransferTotals {
  std::size_t files = 0;
  std::uint64_t bytes = 0;
  // HTTP requests made, retries included (one per file when none retried).
  std::size_t requests = 0;
};

// Every local file to its key (overwriting). Fails with the first error,
// which names the file; files already started finish, no new one starts.
[[nodiscard]] Result<S3TransferTotals> upload_files(const S3Config& config, const std::string& bucket,
                                                    const std::vector<S3TransferFile>& files,
                                                    const S3TransferOptions& options = {});
// Every key to its local file (replacing it); an absent object is an error.
[[nodiscard]] Result<S3TransferTotals> download_files(const S3Config& config, const std::string& bucket,
                                                      const std::vector<S3TransferFile>& files,
                                                      const S3TransferOptions& options = {});

} // namespace npc::storage
