// TLS contexts for Railyard's clients and server (OpenSSL through Boost.Asio). Only the Beast translation
// units include this header (compile cost, see TOOLCHAIN.md).
//
// Clients verify the server: its chain against `ca_file` (a PEM bundle; "" = the system's trust store) and
// its name (DNS or IP subjectAltName) against the host in the URL. TLS 1.2 is the minimum.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>

#include "common/result.hpp"

namespace railyard::net {

// A client context that verifies peers, and shows the certificate in `cert_file` (with its key) when a
// server asks for one (etcd with --client-cert-auth); kInvalidArgument naming the file at fault.
Result<std::shared_ptr<boost::asio::ssl::context>> make_client_tls_context(const std::string& ca_file,
                                                                           const std::string& cert_file = "",
                                                                           const std::string& key_file = "");

// A server context from a PEM certificate chain and its private key; the error names the file at fault.
Result<std::shared_ptr<boost::asio::ssl::context>> make_server_tls_context(const std::string& cert_file,
                                                                          const std::string& key_file);

// "certificate verify failed (self-signed certificate)"-style text for an OpenSSL/Asio error.
std::string tls_error_text(const boost::system::error_code& ec);

}  // namespace railyard::net
