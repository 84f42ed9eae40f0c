// listener: one of faucetsd's TCP ports: binding HOST:PORT, and the accept
// loop both fronts share (the clusters' and the users'): caps per address
// and in total, a pause instead of a spin when descriptors run out, one
// throttled log line per kind of trouble.
// Rule: a listener's loop and counts are touched only on faucetsd's one
// io_context thread (the owner's: cluster_hub or user_api).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <utility>  // before Boost.Asio's awaitable.hpp, which needs std::exchange

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include "server/conn_limits.hpp"

namespace aqs::faucets {

// Binds and listens on "HOST:PORT" ("[::1]:0", ":7878"). Throws
// std::runtime_error naming `what` (the flag) and the address.
std::unique_ptr<boost::asio::ip::tcp::acceptor> listen_on(boost::asio::io_context& io, const std::string& hp,
                                                           const char* what);

struct accept_caps {
  std::shared_ptr<conn_counts> counts;
  std::size_t total = 0, per_address = 0;
  std::string port_name;  // "users' port": in refusals and logs
  std::string log_name;   // "HTTP": prefix of the refusals' log line
};

// Accepts on `acceptor` until it is closed. A connection over the caps (in
// total, or from its address before it proves who it is) is closed at once;
// each admitted one is handed to `serve` with its slot, counted under its
// address.
boost::asio::awaitable<void> accept_loop(boost::asio::ip::tcp::acceptor& acceptor, accept_caps caps,
                                         std::function<void(boost::asio::ip::tcp::socket, conn_slot)> serve);

}  // namespace aqs::faucets
