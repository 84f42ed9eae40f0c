// link_channel: one TLS connection between faucetsd and a cluster's aqsd,
// carrying JSON messages in AQS's frames (protocol/framing) both ways.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <nlohmann/json.hpp>

namespace aqs::faucets {

using tls_socket = boost::asio::ssl::stream<boost::asio::ip::tcp::socket>;

// The link broke or its peer said something unreadable; one line.
class link_error : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

// Largest frame on a link: a forwarded job carries its script (aqsd accepts
// up to 8 MiB of script) and a report lists partitions and data sets.
inline constexpr std::size_t k_max_link_frame = std::size_t{16} << 20;

// Owned through shared_ptr (writes in flight keep it alive). All work runs
// on the socket's executor: construct the socket on a strand when the
// io_context has several threads. send() and close() are thread-safe.
class link_channel : public std::enable_shared_from_this<link_channel> {
public:
  explicit link_channel(tls_socket socket);
  ~link_channel();
  link_channel(const link_channel&) = delete;
  link_channel& operator=(const link_channel&) = delete;

  // The next message, a JSON object with a string "type". Throws link_error
  // (closed, a frame over `max_frame`, not JSON, no type) or
  // boost::system::system_error (the connection broke). A frame's bytes are
  // allocated only once its header is read: a peer not yet authenticated is
  // read with a small `max_frame`.
  boost::asio::awaitable<nlohmann::json> read(std::size_t max_frame = k_max_link_frame);
  // Queues `m` to be written after what is queued already.
  void send(nlohmann::json m);
  // Closes the connection (queued writes are dropped); a pending read ends.
  void close();
  bool closed() const noexcept { return closed_; }

  tls_socket& socket() noexcept { return socket_; }
  // "ADDRESS:PORT" of the peer, kept from when the channel was made.
  const std::string& remote() const noexcept { return remote_; }
  // Bytes written and read so far (the bandwidth probe reads them).
  std::size_t bytes_out() const noexcept { return bytes_out_; }

private:
  void write_next();

  tls_socket socket_;
  std::string remote_;
  std::deque<std::string> queue_;
  bool writing_ = false;
  bool closed_ = false;
  std::size_t bytes_out_ = 0;
};

// The type of a message (its "type" string).
std::string type_of(const nlohmann::json& m);

}  // namespace aqs::faucets
