// listener: binding a port, and the accept loop with its caps and backoff.
#include "server/listener.hpp"

#include <stdexcept>

#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "logging/log.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;

namespace {
std::pair<std::string, std::string> split(const std::string& hp, const char* what) {
  const auto colon = hp.rfind(':');
  if (colon == std::string::npos || colon + 1 == hp.size()) {
    throw std::runtime_error(std::string(what) + " must be HOST:PORT, not '" + hp + "'");
  }
  std::string host = hp.substr(0, colon);
  if (host.size() > 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host.empty() ? "0.0.0.0" : host, hp.substr(colon + 1)};
}
}  // namespace

std::unique_ptr<asio::ip::tcp::acceptor> listen_on(asio::io_context& io, const std::string& hp, const char* what) {
  const auto [host, port] = split(hp, what);
  asio::ip::tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto results = resolver.resolve(host, port, asio::ip::resolver_base::passive, ec);
  if (ec || results.empty()) throw std::runtime_error(std::string("cannot resolve ") + what + " " + hp);
  const auto ep = results.begin()->endpoint();
  auto acc = std::make_unique<asio::ip::tcp::acceptor>(io);
  acc->open(ep.protocol(), ec);
  if (!ec) acc->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acc->bind(ep, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(std::string("cannot listen on ") + hp + " (" + what + "): " + ec.message());
  return acc;
}

asio::awaitable<void> accept_loop(asio::ip::tcp::acceptor& acceptor, accept_caps caps,
                                  std::function<void(asio::ip::tcp::socket, conn_slot)> serve) {
  asio::steady_timer backoff(acceptor.get_executor());
  log_throttle refusals, accept_errors;
  while (acceptor.is_open()) {
    boost::system::error_code ec;
    auto sock = co_await acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) co_return;
      // Out of descriptors (EMFILE) and the like: the listening socket stays
      // readable, so trying again at once would spin. Wait instead.
      if (const auto n = accept_errors.due()) {
        logging::warn("{}: cannot accept a connection ({}, {} time(s)); trying again every {} ms", caps.port_name,
                      ec.message(), n, k_accept_backoff.count());
      }
      backoff.expires_after(k_accept_backoff);
      co_await backoff.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      continue;
    }
    boost::system::error_code rec;
    const auto ep = sock.remote_endpoint(rec);
    const std::string address = rec ? std::string("?") : ep.address().to_string();
    // Until it proves who it is, a peer counts against its address.
    if (const auto why = admit(*caps.counts, address, caps.total, caps.per_address, caps.port_name)) {
      if (const auto n = refusals.due()) logging::warn("{}: {} connection(s) refused: {}", caps.log_name, n, *why);
      boost::system::error_code ignore;
      sock.close(ignore);
      continue;
    }
    serve(std::move(sock), conn_slot(caps.counts, address));
  }
}

}  // namespace aqs::faucets
