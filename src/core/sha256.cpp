#include "core/sha256.h"

#include <openssl/evp.h>

#include "core/check.h"

namespace bitnet {

std::string sha256_hex(std::span<const uint8_t> bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  BITNET_CHECK(EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr) == 1);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

}  // namespace bitnet
