// tls: server and client contexts, TLS 1.2+, no compression or renegotiation.
#include "cluster_link/tls.hpp"

namespace aqs::faucets {

namespace ssl = boost::asio::ssl;

namespace {
constexpr auto k_options = ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                           ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1 | ssl::context::no_compression |
                           ssl::context::single_dh_use;
}

std::unique_ptr<ssl::context> server_tls(const std::filesystem::path& cert_chain,
                                         const std::filesystem::path& private_key) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_server);
  ctx->set_options(k_options);
  boost::system::error_code ec;
  ctx->use_certificate_chain_file(cert_chain.string(), ec);
  if (ec) throw tls_error("cannot read the certificate " + cert_chain.string() + ": " + ec.message());
  ctx->use_private_key_file(private_key.string(), ssl::context::pem, ec);
  if (ec) throw tls_error("cannot read the private key " + private_key.string() + ": " + ec.message());
  return ctx;
}

std::unique_ptr<ssl::context> client_tls(const std::filesystem::path& ca) {
  auto ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
  ctx->set_options(k_options);
  boost::system::error_code ec;
  ctx->load_verify_file(ca.string(), ec);
  if (ec) throw tls_error("cannot read the CA certificate " + ca.string() + ": " + ec.message());
  ctx->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
  return ctx;
}

}  // namespace aqs::faucets
