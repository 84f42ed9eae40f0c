// tls: the TLS contexts of the Faucets link (OpenSSL through Boost.Asio):
// faucetsd presents a certificate, each cluster verifies it against the CA
// the admin gave it, TLS 1.2 or newer only.
#pragma once

#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>

#include <boost/asio/ssl/context.hpp>

namespace aqs::faucets {

class tls_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Throws tls_error naming the file that cannot be read.
std::unique_ptr<boost::asio::ssl::context> server_tls(const std::filesystem::path& cert_chain,
                                                      const std::filesystem::path& private_key);
// Verifies the peer's chain against `ca` (the server's host name is checked
// by the caller's socket, see link_client in the uplink).
std::unique_ptr<boost::asio::ssl::context> client_tls(const std::filesystem::path& ca);

}  // namespace aqs::faucets
