// link_channel: framed JSON over TLS, one write at a time in queue order.
#include "cluster_link/link_channel.hpp"

#include <array>
#include <cstdint>

#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "protocol/framing.hpp"
#include "protocol/json_limits.hpp"

namespace aqs::faucets {

namespace asio = boost::asio;

link_channel::link_channel(tls_socket socket) : socket_(std::move(socket)) {
  boost::system::error_code ec;
  const auto ep = socket_.lowest_layer().remote_endpoint(ec);
  remote_ = ec ? std::string("?") : ep.address().to_string() + ":" + std::to_string(ep.port());
}

link_channel::~link_channel() = default;

asio::awaitable<nlohmann::json> link_channel::read(std::size_t max_frame) {
  std::array<unsigned char, protocol::k_frame_header> head{};
  co_await asio::async_read(socket_, asio::buffer(head), asio::use_awaitable);
  const std::uint32_t n = (std::uint32_t{head[0]} << 24) | (std::uint32_t{head[1]} << 16) |
                          (std::uint32_t{head[2]} << 8) | std::uint32_t{head[3]};
  if (n > max_frame) throw link_error("the peer sent a frame of " + std::to_string(n) + " bytes (at most " +
                                      std::to_string(max_frame) + ")");
  std::string body(n, '\0');
  co_await asio::async_read(socket_, asio::buffer(body), asio::use_awaitable);
  nlohmann::json m;
  try {
    m = protocol::parse_json_bounded(body);
  } catch (const std::exception& e) {
    throw link_error(std::string("the peer sent a frame that is not JSON: ") + e.what());
  }
  if (!m.is_object() || !m.contains("type") || !m["type"].is_string()) {
    throw link_error("the peer sent a message without a \"type\"");
  }
  co_return m;
}

void link_channel::send(nlohmann::json m) {
  std::string frame = protocol::encode_frame(protocol::dump_json(m), k_max_link_frame);
  asio::post(socket_.get_executor(), [self = shared_from_this(), f = std::move(frame)]() mutable {
    if (self->closed_) return;
    self->queue_.push_back(std::move(f));
    if (!self->writing_) self->write_next();
  });
}

void link_channel::write_next() {
  if (queue_.empty() || closed_) {
    writing_ = false;
    return;
  }
  writing_ = true;
  asio::async_write(socket_, asio::buffer(queue_.front()),
                    [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                      self->bytes_out_ += n;
                      if (!self->queue_.empty()) self->queue_.pop_front();
                      if (ec) {
                        self->close();
                        return;
                      }
                      self->write_next();
                    });
}

void link_channel::close() {
  asio::post(socket_.get_executor(), [self = shared_from_this()] {
    if (self->closed_) return;
    self->closed_ = true;
    self->queue_.clear();
    boost::system::error_code ec;
    self->socket_.lowest_layer().shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    self->socket_.lowest_layer().close(ec);
  });
}

std::string type_of(const nlohmann::json& m) {
  const auto it = m.find("type");
  return it != m.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace aqs::faucets
