// http_client: a blocking HTTP/1.1 client for the tests (Boost.Beast), plain
// or TLS (the server's certificate checked against a given CA file), and a
// reader of server-sent events.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <nlohmann/json.hpp>

namespace aqs::test {

struct http_reply {
  unsigned status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
  nlohmann::json json() const { return nlohmann::json::parse(body); }
  std::string error() const {
    try {
      return json().value("error", "");
    } catch (...) {
      return "";
    }
  }
};

struct http_target {
  std::string host = "127.0.0.1";
  unsigned short port = 0;
  std::optional<std::string> ca_file;  // TLS when set
};

// One request on a fresh connection. Throws boost::system::system_error on
// connection failures.
inline http_reply http_request(const http_target& t, const std::string& method, const std::string& target,
                               const std::optional<std::string>& token = std::nullopt, const std::string& body = "",
                               std::map<std::string, std::string> extra = {}) {
  namespace asio = boost::asio;
  namespace beast = boost::beast;
  namespace bhttp = beast::http;
  asio::io_context io;
  asio::ip::tcp::resolver resolver(io);
  const auto eps = resolver.resolve(t.host, std::to_string(t.port));
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  req.set(bhttp::field::host, t.host);
  if (token) req.set(bhttp::field::authorization, "Bearer " + *token);
  for (const auto& [k, v] : extra) req.set(k, v);
  if (!body.empty()) {
    req.set(bhttp::field::content_type, "application/json");
    req.body() = body;
  }
  req.prepare_payload();
  beast::flat_buffer buf;
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(std::uint64_t{1} << 30);
  // A server that refuses a request (413) may close before it has all of
  // it: the write then fails, and its answer is read all the same.
  auto exchange = [&](auto& stream) {
    boost::system::error_code ec;
    bhttp::write(stream, req, ec);
    bhttp::read(stream, buf, parser);
  };
  if (t.ca_file) {
    asio::ssl::context ctx(asio::ssl::context::tls_client);
    ctx.load_verify_file(*t.ca_file);
    ctx.set_verify_mode(asio::ssl::verify_peer);
    beast::ssl_stream<beast::tcp_stream> s(io, ctx);
    beast::get_lowest_layer(s).connect(eps);
    beast::get_lowest_layer(s).expires_after(std::chrono::seconds(60));
    s.handshake(asio::ssl::stream_base::client);
    exchange(s);
  } else {
    beast::tcp_stream s(io);
    s.connect(eps);
    s.expires_after(std::chrono::seconds(60));
    exchange(s);
  }
  http_reply r;
  const auto& res = parser.get();
  r.status = res.result_int();
  r.body = res.body();
  for (const auto& f : res) r.headers[std::string(f.name_string())] = std::string(f.value());
  return r;
}

// A server-sent events stream (plain HTTP): reads events as they come.
class event_stream {
public:
  event_stream(const http_target& t, const std::optional<std::string>& token, const std::string& path = "/api/v1/events")
      : sock_(io_) {
    namespace asio = boost::asio;
    asio::ip::tcp::resolver resolver(io_);
    asio::connect(sock_, resolver.resolve(t.host, std::to_string(t.port)));
    std::string req = "GET " + path + " HTTP/1.1\r\nHost: " + t.host + "\r\n";
    if (token) req += "Authorization: Bearer " + *token + "\r\n";
    req += "\r\n";
    asio::write(sock_, asio::buffer(req));
  }
  // The status line and headers, then everything read so far.
  const std::string& text() const { return text_; }
  // Reads until `pred(text)` or `limit` passes; true if pred held.
  template <class Pred>
  bool read_until(Pred pred, std::chrono::seconds limit) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (!pred(text_)) {
      if (std::chrono::steady_clock::now() > end) return false;
      boost::system::error_code ec;
      sock_.non_blocking(true, ec);
      char buf[4096];
      const std::size_t n = sock_.read_some(boost::asio::buffer(buf), ec);
      if (ec == boost::asio::error::would_block) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      if (ec) return pred(text_);
      text_.append(buf, n);
    }
    return true;
  }

private:
  boost::asio::io_context io_;
  boost::asio::ip::tcp::socket sock_;
  std::string text_;
};

}  // namespace aqs::test
