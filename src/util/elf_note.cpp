#include <npc/util/elf_note.hpp>

#include <cerrno>
#include <cstring>
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <type_traits>
#include <unistd.h>

#include <npc/util/fs.hpp>

namespace npc::util {

namespace {

// The class and byte order of this program's own ELF files: a file of
// another kind cannot run here as one of ours, and is not parsed at all.
constexpr unsigned char kOwnClass = sizeof(void*) == 8 ? ELFCLASS64 : ELFCLASS32;
constexpr unsigned char kOwnData = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? ELFDATA2LSB : ELFDATA2MSB;
using Ehdr = std::conditional_t<sizeof(void*) == 8, Elf64_Ehdr, Elf32_Ehdr>;
using Phdr = std::conditional_t<sizeof(void*) == 8, Elf64_Phdr, Elf32_Phdr>;
using Nhdr = std::conditional_t<sizeof(void*) == 8, Elf64_Nhdr, Elf32_Nhdr>;

// Read first, in one system call: the ELF header, the program headers and
// the note segments of a program linked the usual way all lie in the first
// page (the notes at about 0x300 in a PIE). What lies further is read apart.
constexpr std::size_t kHeadBytes = 4096;
// A linked program has about a dozen program headers; more than this is a
// file we will not trust with a read of its own choosing.
constexpr std::size_t kMaxProgramHeaders = 128;
// Notes are tens of bytes (a build-id is 36); a note segment larger than
// this is not looked into.
constexpr std::size_t kMaxNoteSegmentBytes = 64 * 1024;

std::size_t align_up(std::size_t n, std::size_t alignment) { return (n + alignment - 1) / alignment * alignment; }

// Exactly `size` bytes at `offset`, from `head` when they lie in it.
std::optional<std::string> read_at(int fd, const std::string& head, std::uint64_t offset, std::size_t size) {
  if (offset <= head.size() && size <= head.size() - offset) return head.substr(offset, size);
  std::string bytes(size, '\0');
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = ::pread(fd, bytes.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    got += static_cast<std::size_t>(n);
  }
  return bytes;
}

// The descriptor of the note of `owner` and `type` in one note segment.
std::optional<std::string> find_in_segment(std::string_view notes, std::size_t alignment, std::string_view owner,
                                           std::uint32_t type) {
  std::size_t at = 0;
  while (notes.size() - at >= sizeof(Nhdr)) {
    Nhdr header;
    std::memcpy(&header, notes.data() + at, sizeof header);
    const std::size_t name_at = at + sizeof header;
    if (header.n_namesz > notes.size() - name_at) return std::nullopt;
    // Offsets from the segment's start, itself aligned: with 8, the name
    // of a note (4 bytes for "GNU") is followed by padding up to an 8-byte
    // offset, not the name's size padded to 8.
    const std::size_t desc_at = align_up(name_at + header.n_namesz, alignment);
    if (desc_at > notes.size() || header.n_descsz > notes.size() - desc_at) return std::nullopt;
    // The name is stored with its NUL.
    std::string_view name = notes.substr(name_at, header.n_namesz);
    if (!name.empty() && name.back() == '\0') name.remove_suffix(1);
    if (header.n_type == type && name == owner) return std::string(notes.substr(desc_at, header.n_descsz));
    at = align_up(desc_at + header.n_descsz, alignment);
    if (at > notes.size()) return std::nullopt;
  }
  return std::nullopt;
}

} // namespace

std::optional<std::string> find_elf_note(const fs::path& path, std::string_view owner, std::uint32_t type) {
  // O_NONBLOCK: a FIFO put where a program was expected must not hang us
  // before fstat() says what it is.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd.valid()) return std::nullopt;
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  std::string head(kHeadBytes, '\0');
  ssize_t n;
  do {
    n = ::pread(fd.get(), head.data(), head.size(), 0);
  } while (n < 0 && errno == EINTR);
  if (n < static_cast<ssize_t>(sizeof(Ehdr))) return std::nullopt;
  head.resize(static_cast<std::size_t>(n));

  Ehdr elf;
  std::memcpy(&elf, head.data(), sizeof elf);
  if (std::memcmp(elf.e_ident, ELFMAG, SELFMAG) != 0 || elf.e_ident[EI_CLASS] != kOwnClass ||
      elf.e_ident[EI_DATA] != kOwnData)
    return std::nullopt;
  if (elf.e_phentsize != sizeof(Phdr) || elf.e_phnum == 0 || elf.e_phnum > kMaxProgramHeaders) return std::nullopt;
  auto table = read_at(fd.get(), head, elf.e_phoff, std::size_t{elf.e_phnum} * sizeof(Phdr));
  if (!table) return std::nullopt;
  for (std::size_t i = 0; i < elf.e_phnum; ++i) {
    Phdr segment;
    std::memcpy(&segment, table->data() + i * sizeof(Phdr), sizeof segment);
    if (segment.p_type != PT_NOTE || segment.p_filesz > kMaxNoteSegmentBytes) continue;
    auto notes = read_at(fd.get(), head, segment.p_offset, segment.p_filesz);
    if (!notes) continue;
    // Notes are padded to 4 bytes, or to 8 in a segment aligned so
    // (.note.gnu.property), as the gABI and the linkers have it.
    const std::size_t alignment = segment.p_align == 8 ? 8 : 4;
    if (auto desc = find_in_segment(*notes, alignment, owner, type)) return desc;
  }
  return std::nullopt;
}

} // namespace npc::util
