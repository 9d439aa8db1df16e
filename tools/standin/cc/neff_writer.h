// Putting the NEFF at the output path.
#pragma once

#include <string>

namespace standin::cc {

// Writes to a temporary file in the same directory and renames it into
// place, so a compiler killed mid-write never leaves a complete-looking NEFF.
// Throws failure() on error.
void write_neff_atomically(const std::string& output_path, const std::string& neff);

// Writes straight to the output path (for the "truncate" fault, which
// simulates a broken compiler that leaves a partial file behind).
void write_neff_in_place(const std::string& output_path, const std::string& neff);

}  // namespace standin::cc
