#include "common/protocol/mac.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>
#include <string>

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

bool valid_challenge(std::string_view challenge) {
  if (challenge.size() != 2 * kChallengeBytes) return false;
  for (char c : challenge)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

std::string session_key(std::string_view key, std::string_view challenge, std::string_view agent_challenge,
                        std::string_view agent) {
  std::string text = "session\n";
  text.append(challenge).append("\n").append(agent_challenge).append("\n").append(agent);
  return hmac_sha256_hex(key, text);
}

namespace {

constexpr std::string_view kMacOpen = ",\"mac\":\"";
constexpr size_t kMacHex = 64;
constexpr size_t kSuffixSize = kMacOpen.size() + kMacHex + 2;  // ,"mac":"<hex>"}

}  // namespace

std::string OrderSealer::seal(std::string text) {
  const bool empty = text.size() <= 2;  // "{}"
  text.insert(1, "\"n\":" + std::to_string(++sent_) + (empty ? "" : ","));
  const std::string mac = hmac_sha256_hex(key_, text);
  text.pop_back();  // the closing '}'
  text.append(kMacOpen).append(mac).append("\"}");
  return text;
}

Status OrderVerifier::verify(std::string_view text, const nlohmann::json& msg) {
  if (text.size() < kSuffixSize + 1 || text.back() != '}' ||
      text.substr(text.size() - kSuffixSize, kMacOpen.size()) != kMacOpen ||
      text[text.size() - 2] != '"')
    return invalid("no MAC");
  const std::string_view mac = text.substr(text.size() - kSuffixSize + kMacOpen.size(), kMacHex);
  std::string signed_text(text.substr(0, text.size() - kSuffixSize));
  signed_text.push_back('}');
  if (!same_mac(mac, hmac_sha256_hex(key_, signed_text))) return invalid("bad MAC (not made with this session's key)");
  auto n = msg.find("n");
  if (n == msg.end() || !n->is_number_integer()) return invalid("no counter \"n\"");
  const int64_t value = n->get<int64_t>();
  if (value <= last_)
    return invalid("replayed or out of order: n " + std::to_string(value) + " after " + std::to_string(last_));
  last_ = value;
  return ok();
}

}  // namespace railyard::protocol
