// SHA-256 of a byte range (OpenSSL's libcrypto), hex-encoded: model file hashes in receipts.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace bitnet {

std::string sha256_hex(std::span<const uint8_t> bytes);

}  // namespace bitnet
