#include "common/protocol/mac.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

namespace railyard::protocol {
namespace {

std::string hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

}  // namespace

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(data.data()),
       data.size(), out, &len);
  return hex(out, len);
}

std::string sha256_hex(std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), out, &len, EVP_sha256(), nullptr);
  return hex(out, len);
}

std::string register_mac(std::string_view secret, std::string_view challenge, std::string_view agent,
                         const std::vector<std::string>& nodes) {
  std::string text = std::string(challenge) + "\n" + std::string(agent) + "\n";
  for (size_t i = 0; i < nodes.size(); ++i) text += (i ? "," : "") + nodes[i];
  return hmac_sha256_hex(secret, text);
}

std::string node_mac(std::string_view node_key, std::string_view challenge, std::string_view agent,
                     std::string_view node) {
  return register_mac(node_key, challenge, agent, {std::string(node)});
}

std::string exec_token(std::string_view key, std::string_view alloc) {
  return hmac_sha256_hex(key, "exec\n" + std::string(alloc));
}

bool same_mac(std::string_view a, std::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string random_hex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), static_cast<int>(bytes)) != 1)
    throw std::runtime_error("RAND_bytes failed");
  return hex(reinterpret_cast<const unsigned char*>(raw.data()), bytes);
}

}  // namespace railyard::protocol
