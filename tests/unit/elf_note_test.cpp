// util/elf_note: the notes of an ELF file, found from its program headers
// without running it, and nothing read beyond bounds from a file that lies.

#include <elf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <npc/util/elf_note.hpp>

#include "temp_dir.hpp"
#include "test_support.hpp"

namespace npc::util {
namespace {

using npc::test::write_text;

class ElfNoteTest : public npc::test::TempDirTest {};

std::string padded(std::string bytes, std::size_t alignment) {
  bytes.resize((bytes.size() + alignment - 1) / alignment * alignment, '\0');
  return bytes;
}

// One note as a linker lays it out, starting at an aligned offset: the
// three words and the name with its NUL, padded; the descriptor, padded.
std::string note(const std::string& owner, std::uint32_t type, const std::string& desc, std::size_t alignment = 4) {
  Elf64_Nhdr header{static_cast<Elf64_Word>(owner.size() + 1), static_cast<Elf64_Word>(desc.size()), type};
  std::string bytes(reinterpret_cast<const char*>(&header), sizeof header);
  return padded(bytes + owner + '\0', alignment) + padded(desc, alignment);
}

struct Segment {
  std::uint32_t type = PT_NOTE;
  std::uint64_t align = 4;
  std::string bytes;
};

// A 64-bit little-endian ELF file with these segments after its headers.
std::string elf_file(const std::vector<Segment>& segments) {
  Elf64_Ehdr elf{};
  std::memcpy(elf.e_ident, ELFMAG, SELFMAG);
  elf.e_ident[EI_CLASS] = ELFCLASS64;
  elf.e_ident[EI_DATA] = ELFDATA2LSB;
  elf.e_ident[EI_VERSION] = EV_CURRENT;
  elf.e_type = ET_DYN;
  elf.e_machine = EM_X86_64;
  elf.e_version = EV_CURRENT;
  elf.e_phoff = sizeof elf;
  elf.e_ehsize = sizeof elf;
  elf.e_phentsize = sizeof(Elf64_Phdr);
  elf.e_phnum = static_cast<Elf64_Half>(segments.size());
  std::string headers(reinterpret_cast<const char*>(&elf), sizeof elf);
  std::string contents;
  std::uint64_t offset = sizeof elf + segments.size() * sizeof(Elf64_Phdr);
  for (const auto& segment : segments) {
    Elf64_Phdr phdr{};
    phdr.p_type = segment.type;
    phdr.p_offset = offset + contents.size();
    phdr.p_filesz = segment.bytes.size();
    phdr.p_memsz = segment.bytes.size();
    phdr.p_align = segment.align;
    headers.append(reinterpret_cast<const char*>(&phdr), sizeof phdr);
    contents += segment.bytes;
  }
  return headers + contents;
}

Elf64_Ehdr& header_of(std::string& file) { return *reinterpret_cast<Elf64_Ehdr*>(file.data()); }
Elf64_Phdr& program_header(std::string& file, std::size_t i) {
  return *reinterpret_cast<Elf64_Phdr*>(file.data() + sizeof(Elf64_Ehdr) + i * sizeof(Elf64_Phdr));
}

TEST_F(ElfNoteTest, FindsANoteByOwnerAndTypeAmongOthers) {
  const fs::path file = dir() / "prog";
  write_text(file, elf_file({{PT_LOAD, 4096, "code"},
                             {PT_NOTE, 4, note("GNU", NT_GNU_BUILD_ID, "0123456789abcdef0123") + note("xyz", 1, "a") +
                                              note("xyzw", 7, "the desc")},
                             {PT_NOTE, 8, note("GNU", 5, "12345678", 8) + note("xyzw", 1, "in eight", 8)}}));
  EXPECT_EQ(find_elf_note(file, "xyzw", 7), "the desc");
  EXPECT_EQ(find_elf_note(file, "xyz", 1), "a");
  EXPECT_EQ(find_elf_note(file, "xyzw", 1), "in eight") << "a segment aligned to 8 pads its notes to 8";
  EXPECT_EQ(find_elf_note(file, "xyzw", 2), std::nullopt) << "another type";
  EXPECT_EQ(find_elf_note(file, "xy", 1), std::nullopt) << "a name is compared whole";
  EXPECT_EQ(find_elf_note(file, "GNU", NT_GNU_BUILD_ID), "0123456789abcdef0123");
  EXPECT_EQ(find_elf_note(file, "GNU", 5), "12345678") << "its descriptor at offset 16, not 20";
}

TEST_F(ElfNoteTest, ANoteBeyondTheFirstPageIsReadApart) {
  const fs::path file = dir() / "prog";
  // A first segment of 8 KiB puts the notes past what the first read holds.
  write_text(file, elf_file({{PT_LOAD, 4096, std::string(8192, 'x')}, {PT_NOTE, 4, note("far", 1, "away")}}));
  EXPECT_EQ(find_elf_note(file, "far", 1), "away");
}

TEST_F(ElfNoteTest, WhatIsNoElfFileOfThisMachineHasNoNotes) {
  write_text(dir() / "script", "#!/usr/bin/python3\nimport sys\nsys.exit(0)\n");
  EXPECT_EQ(find_elf_note(dir() / "script", "GNU", NT_GNU_BUILD_ID), std::nullopt);
  write_text(dir() / "empty", "");
  EXPECT_EQ(find_elf_note(dir() / "empty", "GNU", NT_GNU_BUILD_ID), std::nullopt);
  std::string whole = elf_file({{PT_NOTE, 4, note("own", 1, "d")}});
  write_text(dir() / "cut", whole.substr(0, 40)); // shorter than the ELF header
  EXPECT_EQ(find_elf_note(dir() / "cut", "own", 1), std::nullopt);
  std::string big_endian = whole;
  header_of(big_endian).e_ident[EI_DATA] = ELFDATA2MSB;
  write_text(dir() / "big-endian", big_endian);
  EXPECT_EQ(find_elf_note(dir() / "big-endian", "own", 1), std::nullopt);
  std::string other_class = whole;
  header_of(other_class).e_ident[EI_CLASS] = ELFCLASS32;
  write_text(dir() / "32-bit", other_class);
  EXPECT_EQ(find_elf_note(dir() / "32-bit", "own", 1), std::nullopt);
  write_text(dir() / "good", whole);
  EXPECT_EQ(find_elf_note(dir() / "good", "own", 1), "d") << "the same file, unspoilt";
}

TEST_F(ElfNoteTest, SizesThatLieAreNoNoteAndNoLargeRead) {
  const std::string whole = elf_file({{PT_NOTE, 4, note("own", 1, "desc")}});
  std::string many_headers = whole;
  header_of(many_headers).e_phnum = 60000;
  write_text(dir() / "many-headers", many_headers);
  EXPECT_EQ(find_elf_note(dir() / "many-headers", "own", 1), std::nullopt);
  std::string huge_segment = whole;
  program_header(huge_segment, 0).p_filesz = std::uint64_t{1} << 40;
  write_text(dir() / "huge-segment", huge_segment);
  EXPECT_EQ(find_elf_note(dir() / "huge-segment", "own", 1), std::nullopt);
  std::string past_the_end = whole;
  program_header(past_the_end, 0).p_offset = 1 << 20;
  write_text(dir() / "past-the-end", past_the_end);
  EXPECT_EQ(find_elf_note(dir() / "past-the-end", "own", 1), std::nullopt);
  // A name size larger than the segment.
  std::string long_name = whole;
  reinterpret_cast<Elf64_Nhdr*>(long_name.data() + program_header(long_name, 0).p_offset)->n_namesz = 1000;
  write_text(dir() / "long-name", long_name);
  EXPECT_EQ(find_elf_note(dir() / "long-name", "own", 1), std::nullopt);
  std::string long_desc = whole;
  reinterpret_cast<Elf64_Nhdr*>(long_desc.data() + program_header(long_desc, 0).p_offset)->n_descsz = 0xffffffffu;
  write_text(dir() / "long-desc", long_desc);
  EXPECT_EQ(find_elf_note(dir() / "long-desc", "own", 1), std::nullopt);
}

TEST_F(ElfNoteTest, OnlyARegularFileIsRead) {
  const fs::path fifo = dir() / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(find_elf_note(fifo, "own", 1), std::nullopt) << "returned at once, no writer waited for";
  EXPECT_EQ(find_elf_note(dir(), "own", 1), std::nullopt);
  EXPECT_EQ(find_elf_note("/dev/zero", "own", 1), std::nullopt);
  EXPECT_EQ(find_elf_note(dir() / "missing", "own", 1), std::nullopt);
}

} // namespace
} // namespace npc::util
