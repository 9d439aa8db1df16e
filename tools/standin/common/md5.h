// MD5 through OpenSSL's EVP interface. Only the stand-in training script's
// torch-neuronx mode uses it: the framework names cache entries after an MD5
// of the compiler flags. Not for security.
#pragma once

#include <string>
#include <string_view>

namespace standin {

// Lower-case hex, 32 characters.
std::string md5_hex(std::string_view data);

}  // namespace standin
