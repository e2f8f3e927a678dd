#include "common/net/tls.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/error.hpp>
#include <fstream>

namespace railyard::net {

namespace ssl = boost::asio::ssl;

namespace {

Status readable(const std::string& path, const std::string& what) {
  std::ifstream in(path);
  if (!in) return invalid(what + " " + path + ": cannot open");
  return ok();
}

}  // namespace

std::string tls_error_text(const boost::system::error_code& ec) {
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    std::string text = ERR_reason_error_string(static_cast<unsigned long>(ec.value()))
                           ? ERR_reason_error_string(static_cast<unsigned long>(ec.value()))
                           : ec.message();
    return "TLS: " + text;
  }
  if (ec == ssl::error::stream_truncated) return "TLS: connection closed without close_notify";
  return ec.message();
}

Result<std::shared_ptr<ssl::context>> make_client_tls_context(const std::string& ca_file,
                                                              const std::string& cert_file,
                                                              const std::string& key_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_client);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1,
                   ec);
  ctx->set_verify_mode(ssl::verify_peer, ec);
  if (ca_file.empty()) {
    ctx->set_default_verify_paths(ec);
    if (ec) return invalid("TLS: cannot load the system's CA certificates: " + ec.message());
  } else {
    if (auto s = readable(ca_file, "CA file"); !s) return s.error();
    ctx->load_verify_file(ca_file, ec);
    if (ec) return invalid("CA file " + ca_file + ": not a PEM certificate bundle (" + ec.message() + ")");
  }
  if (cert_file.empty() != key_file.empty()) return invalid("a client certificate and its key go together");
  if (cert_file.empty()) return ctx;
  if (auto s = readable(cert_file, "client certificate"); !s) return s.error();
  if (auto s = readable(key_file, "client key"); !s) return s.error();
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec)
    return invalid("client certificate " + cert_file + ": not a PEM certificate chain (" + ec.message() +
                   ")");
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec || SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return invalid("client key " + key_file + ": not the PEM private key of " + cert_file);
  return ctx;
}

Result<std::shared_ptr<ssl::context>> make_server_tls_context(const std::string& cert_file,
                                                             const std::string& key_file) {
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  boost::system::error_code ec;
  ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                       ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::single_dh_use,
                   ec);
  if (auto s = readable(cert_file, "--tls-cert"); !s) return s.error();
  if (auto s = readable(key_file, "--tls-key"); !s) return s.error();
  ctx->use_certificate_chain_file(cert_file, ec);
  if (ec) return invalid("--tls-cert " + cert_file + ": not a PEM certificate chain (" + ec.message() + ")");
  ctx->use_private_key_file(key_file, ssl::context::pem, ec);
  if (ec && ec.message().find("mismatch") != std::string::npos)
    return invalid("--tls-key " + key_file + ": does not match the certificate in " + cert_file);
  if (ec) return invalid("--tls-key " + key_file + ": not a PEM private key (" + ec.message() + ")");
  if (SSL_CTX_check_private_key(ctx->native_handle()) != 1)
    return invalid("--tls-key " + key_file + ": does not match the certificate in " + cert_file);
  return ctx;
}

}  // namespace railyard::net
