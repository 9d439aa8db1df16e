#pragma once
// Fills OpenSSL's CPU capability vector before the first digest
// (src/util/openssl_cpu.cpp says why it is not OpenSSL's own probe).
// Thread-safe; cheap after the first call.

namespace npc::util {

void prepare_openssl_cpu();

} // namespace npc::util
