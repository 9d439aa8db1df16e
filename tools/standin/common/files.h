// Small POSIX file helpers shared by the stand-ins.
#pragma once

#include <string>
#include <string_view>

namespace standin {

// Whole file as bytes; throws failure("cannot read <what> '<path>': <reason>").
std::string read_file(const std::string& path, const std::string& what);

// Writes every byte, retrying short writes and EINTR; false with errno set on error.
bool write_all(int fd, std::string_view data);

// Reads everything until EOF; false with errno set on error.
bool read_all(int fd, std::string& out);

// strerror(errno) as a std::string, for one-line messages.
std::string errno_text();

}  // namespace standin
