#include <npc/storage/s3_transfer.hpp>

#include <algorithm>
#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace npc::storage {

namespace {

// One file's work on a worker's own client: the bytes moved, or why not.
using FileJob = std::function<Result<std::uint64_t>(S3Client& client, const S3TransferFile& file)>;

Result<S3TransferTotals> run_workers(const S3Config& config, const std::vector<S3TransferFile>& files,
                                     const S3TransferOptions& options, const FileJob& job) {
  if (options.concurrency < 1) return fail("S3 transfer concurrency must be at least 1");
  const std::size_t workers = std::min<std::size_t>(static_cast<std::size_t>(options.concurrency), files.size());
  // Clients are made before any thread starts, so that a bad configuration
  // is reported once and nothing has been sent.
  std::vector<std::unique_ptr<S3Client>> clients;
  for (std::size_t i = 0; i < workers; ++i) {
    auto client = S3Client::create(config, options.client);
    if (!client) return fail(client.error());
    clients.push_back(std::move(*client));
  }

  std::atomic<std::size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mutex; // guards first_error and totals
  std::optional<std::string> first_error;
  S3TransferTotals totals;
  auto work = [&](S3Client& client) {
    for (;;) {
      if (stop.load()) return;
      std::size_t index = next.fetch_add(1);
      if (index >= files.size()) return;
      auto moved = job(client, files[index]);
      std::lock_guard lock(mutex);
      totals.requests += static_cast<std::size_t>(std::max(client.last_attempts(), 0));
      if (!moved) {
        if (!first_error) first_error = moved.error();
        stop.store(true);
        return;
      }
      ++totals.files;
      totals.bytes += *moved;
    }
  };
  std::vector<std::jthread> threads;
  for (std::size_t i = 1; i < workers; ++i) threads.emplace_back(work, std::ref(*clients[i]));
  if (workers > 0) work(*clients[0]); // this thread is worker 0
  threads.clear();                     // joins
  if (first_error) return fail(*first_error);
  return totals;
}

} // namespace

Result<S3TransferTotals> upload_files(const S3Config& config, const std::string& bucket,
                                      const std::vector<S3TransferFile>& files, const S3TransferOptions& options) {
  return run_workers(config, files, options,
                     [&](S3Client& client, const S3TransferFile& file) -> Result<std::uint64_t> {
                       std::error_code ec;
                       std::uint64_t size = std::filesystem::file_size(file.local, ec);
                       if (ec) return fail("cannot upload " + file.local.string() + ": " + ec.message());
                       auto put = client.put_file(bucket, file.key, file.local);
                       if (!put) return fail(put.error());
                       return size;
                     });
}

Result<S3TransferTotals> download_files(const S3Config& config, const std::string& bucket,
                                        const std::vector<S3TransferFile>& files, const S3TransferOptions& options) {
  return run_workers(config, files, options,
                     [&](S3Client& client, const S3TransferFile& file) -> Result<std::uint64_t> {
                       auto got = client.get_file(bucket, file.key, file.local);
                       if (!got) return fail(got.error());
                       if (!*got)
                         return fail("cannot download s3://" + bucket + "/" + file.key + " to " +
                                     file.local.string() + ": no such object");
                       std::error_code ec;
                       std::uint64_t size = std::filesystem::file_size(file.local, ec);
                       if (ec) return fail("cannot read the size of " + file.local.string() + ": " + ec.message());
                       return size;
                     });
}

} // namespace npc::storage
