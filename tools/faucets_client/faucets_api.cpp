// faucets_api: one blocking HTTP(S) exchange per call, with Boost.Beast over
// Boost.Asio (OpenSSL); asynchronous operations run to completion on a
// private io_context so that each step has a deadline.
#include "faucets_client/faucets_api.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <pwd.h>
#include <sstream>
#include <unistd.h>
#include <utility>  // before Boost.Asio (1.74 misses it)
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

namespace aqs::client::faucets {

namespace asio = boost::asio;
namespace ssl = asio::ssl;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

// Printable, one line, at most `max` characters.
std::string one_line(std::string_view s, std::size_t max = 300) {
  std::string out;
  for (const char c : s.substr(0, max)) out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c);
  while (!out.empty() && out.back() == ' ') out.pop_back();
  if (s.size() > max) out += "...";
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string seconds_text(std::chrono::milliseconds d) {
  const auto ms = d.count();
  if (ms % 1000 == 0) return std::to_string(ms / 1000) + " s";
  std::ostringstream o;
  o << static_cast<double>(ms) / 1000.0 << " s";
  return o.str();
}

std::optional<std::string> env_value(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

// A small file's text (its first 64 KiB); nullopt, errno in `err` and its
// text in `why` if it cannot be read.
std::optional<std::string> read_small_file(const std::string& path, std::string& why, int& err) {
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    err = errno != 0 ? errno : ENOENT;
    why = std::strerror(err);
    return std::nullopt;
  }
  if (std::filesystem::is_directory(path)) {
    err = EISDIR;
    why = std::strerror(err);
    return std::nullopt;
  }
  std::string text(64 * 1024 + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) {
    err = EIO;
    why = "read error";
    return std::nullopt;
  }
  text.resize(static_cast<std::size_t>(in.gcount()));
  return text;
}

bool is_ip_address(std::string_view host) {
  boost::system::error_code ec;
  (void)asio::ip::make_address(std::string(host), ec);
  return !ec;
}

}  // namespace

// ---- URL -----------------------------------------------------------------------

bool is_loopback_host(std::string_view host) {
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  const std::string h = lower(host);
  if (h == "localhost" || h == "localhost.") return true;
  boost::system::error_code ec;
  const auto a = asio::ip::make_address(h, ec);
  if (ec) return false;
  if (a.is_v6() && a.to_v6().is_v4_mapped()) {
    return asio::ip::make_address_v4(asio::ip::v4_mapped, a.to_v6()).is_loopback();
  }
  return a.is_loopback();
}

std::string base_url::text() const {
  const bool v6 = host.find(':') != std::string::npos;
  return std::string(tls ? "https://" : "http://") + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port) +
         prefix;
}

base_url parse_base_url(std::string_view text) {
  const std::string shown = one_line(text, 200);
  const std::string expected =
      " (expected https://HOST:PORT, or http://127.0.0.1:PORT for a server on this machine)";
  const auto sep = text.find("://");
  if (sep == std::string_view::npos) throw error("invalid faucets server URL '" + shown + "'" + expected);
  const std::string scheme = lower(text.substr(0, sep));
  base_url u;
  if (scheme == "https") {
    u.tls = true;
    u.port = 443;
  } else if (scheme == "http") {
    u.tls = false;
    u.port = 80;
  } else {
    throw error("unsupported scheme '" + one_line(scheme, 20) + "' in the faucets server URL '" + shown + "'" + expected);
  }
  std::string_view rest = text.substr(sep + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    throw error("the faucets server URL '" + shown + "' has a query or fragment" + expected);
  }
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos) {
    throw error("the faucets server URL '" + shown + "' has a user name in it; the token goes in $AQS_TOKEN or a token file");
  }
  std::string_view port_text;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw error("invalid IPv6 address in the faucets server URL '" + shown + "'");
    u.host = std::string(authority.substr(1, close - 1));
    const std::string_view after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw error("invalid faucets server URL '" + shown + "'" + expected);
      port_text = after.substr(1);
      if (port_text.empty()) throw error("empty port in the faucets server URL '" + shown + "'");
    }
    if (!is_ip_address(u.host) || u.host.find(':') == std::string::npos) {
      throw error("invalid IPv6 address in the faucets server URL '" + shown + "'");
    }
  } else {
    const auto colon = authority.find(':');
    u.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) {
      port_text = authority.substr(colon + 1);
      if (port_text.empty()) throw error("empty port in the faucets server URL '" + shown + "'");
    }
  }
  if (u.host.empty()) throw error("no host in the faucets server URL '" + shown + "'" + expected);
  for (const char c : u.host) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '-' || c == '_' || c == ':';
    if (!ok) throw error("invalid host '" + one_line(u.host, 100) + "' in the faucets server URL '" + shown + "'");
  }
  if (!port_text.empty()) {
    unsigned long p = 0;
    bool ok = port_text.size() <= 5;
    for (const char c : port_text) {
      if (c < '0' || c > '9') ok = false;
      if (ok) p = p * 10 + static_cast<unsigned long>(c - '0');
    }
    if (!ok || p < 1 || p > 65535) {
      throw error("invalid port '" + one_line(port_text, 20) + "' in the faucets server URL '" + shown + "' (1-65535)");
    }
    u.port = static_cast<std::uint16_t>(p);
  }
  std::string prefix(path);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  for (const char c : prefix) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      throw error("invalid path in the faucets server URL '" + shown + "'");
    }
  }
  u.prefix = prefix;
  if (!u.tls && !is_loopback_host(u.host)) {
    throw error("refusing plain http:// to '" + one_line(u.host, 100) +
                "': the token would cross the network unencrypted; use https://" +
                (u.host.find(':') != std::string::npos ? "[" + u.host + "]" : u.host) + ":PORT (http:// is for "
                "localhost and 127.0.0.1 only)");
  }
  return u;
}

std::string url_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
                       c == '_' || c == '.' || c == '~';
    if (plain) {
      out.push_back(ch);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// ---- environment and token ---------------------------------------------------

environment environment::of_process() {
  environment e;
  e.faucets = env_value("AQS_FAUCETS");
  e.faucets_ca = env_value("AQS_FAUCETS_CA");
  e.token = env_value("AQS_TOKEN");
  e.home = env_value("HOME");
  if (!e.home) {
    std::vector<char> buf(16384);
    passwd pw{};
    passwd* found = nullptr;
    if (::getpwuid_r(::getuid(), &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr &&
        found->pw_dir != nullptr && *found->pw_dir != '\0') {
      e.home = std::string(found->pw_dir);
    }
  }
  return e;
}

namespace {

// The token in `text` (its first line, blanks dropped); throws if it is not
// printable ASCII without blanks (it goes into an HTTP header).
std::string token_text(std::string_view text, const std::string& source) {
  const auto nl = text.find('\n');
  std::string_view t = text.substr(0, nl);
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t' || t.front() == '\r')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t' || t.back() == '\r')) t.remove_suffix(1);
  if (t.empty()) throw error("the token in " + source + " is empty");
  for (const char c : t) {
    if (c <= 0x20 || c >= 0x7f) {
      throw error("the token in " + source + " is not one word of printable characters");
    }
  }
  return std::string(t);
}

}  // namespace

found_token find_token(const environment& env, const std::optional<std::string>& token_file) {
  if (env.token) return {token_text(*env.token, "$AQS_TOKEN"), "$AQS_TOKEN"};
  std::string why;
  int err = 0;
  if (token_file) {
    const auto text = read_small_file(*token_file, why, err);
    if (!text) throw error("cannot read the token file '" + one_line(*token_file, 200) + "' (--token-file): " + why);
    return {token_text(*text, "the token file '" + one_line(*token_file, 200) + "'"), *token_file};
  }
  const std::string how =
      "set AQS_TOKEN, pass --token-file FILE, or save one in ~/.aqs/faucets-token (ftoken --socket "
      "/var/lib/aqs-faucets/faucetsd.sock on the server prints one)";
  if (env.home) {
    const std::string path = *env.home + "/.aqs/faucets-token";
    const auto text = read_small_file(path, why, err);
    if (text) return {token_text(*text, "the token file '" + path + "'"), path};
    if (err != ENOENT) throw error("cannot read the token file '" + one_line(path, 200) + "': " + why);
  }
  throw error("no token for the faucets server: " + how);
}

client_options resolve_client_options(const std::optional<std::string>& url_option,
                                      const std::optional<std::string>& ca_option,
                                      const std::optional<std::string>& token_file_option, const environment& env) {
  client_options o;
  const auto url = url_option ? url_option : env.faucets;
  if (!url) throw error("no Faucets server given: set AQS_FAUCETS=https://HOST:PORT or pass --faucets URL");
  o.url = parse_base_url(*url);
  o.ca_file = ca_option ? ca_option : env.faucets_ca;
  o.token = find_token(env, token_file_option).token;
  return o;
}

// ---- errors of HTTP answers ----------------------------------------------------

std::string http_error_message(int status, std::string_view body, std::string_view reason) {
  std::string text;
  const auto j = nlohmann::json::parse(body.begin(), body.end(), nullptr, false);
  if (j.is_object()) {
    const auto it = j.find("error");
    if (it != j.end() && it->is_string()) text = one_line(it->get<std::string>());
  }
  if (text.empty()) {
    if (status == 401) return "the faucets server refused the token (HTTP 401)";
    std::string r = one_line(reason, 80);
    if (r.empty()) r = std::string(bhttp::obsolete_reason(static_cast<bhttp::status>(status)));
    return "the faucets server answered HTTP " + std::to_string(status) + (r.empty() ? "" : " " + r);
  }
  if (status == 401) return "the faucets server refused the token: " + text;
  if (status == 403) return "the faucets server does not allow it: " + text;
  if (status == 503) return "the faucets server is unavailable: " + text;
  if (status >= 500) return "the faucets server failed: " + text;
  return text;
}

// ---- the client ------------------------------------------------------------------

struct client::impl {
  client_options options;
  std::optional<ssl::context> tls;

  struct answer {
    int status = 0;
    std::string reason;
    std::string body;
  };

  std::string where() const { return options.url.text(); }

  // Runs `io` until the started operation's handler set `done`, or until
  // `limit`; then `cancel()` and run to the end. True if it timed out.
  template <class Cancel>
  static bool run(asio::io_context& io, const bool& done, std::chrono::milliseconds limit, Cancel&& cancel) {
    io.restart();
    io.run_for(limit);
    if (done) return false;
    cancel();
    io.restart();
    io.run();
    return true;
  }

  answer exchange(bhttp::verb method, const std::string& target, const std::optional<std::string>& body) {
    asio::io_context io;
    const std::string url = where();
    const auto connect_deadline = std::chrono::steady_clock::now() + options.connect_timeout;
    auto left = [&](std::chrono::steady_clock::time_point deadline) {
      return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        deadline - std::chrono::steady_clock::now()));
    };
    const std::string no_answer_connect = "cannot reach the faucets server at " + url + ": no answer within " +
                                          seconds_text(options.connect_timeout);

    // Resolve.
    tcp::resolver resolver(io);
    tcp::resolver::results_type endpoints;
    boost::system::error_code ec;
    bool done = false;
    resolver.async_resolve(options.url.host, std::to_string(options.url.port),
                           [&](const boost::system::error_code& e, tcp::resolver::results_type r) {
                             ec = e;
                             endpoints = std::move(r);
                             done = true;
                           });
    if (run(io, done, left(connect_deadline), [&] { resolver.cancel(); })) throw error(no_answer_connect);
    if (ec) {
      throw error("cannot resolve the faucets server's host '" + options.url.host + "' (" + url + "): " + ec.message());
    }

    // Connect.
    tcp::socket socket(io);
    done = false;
    asio::async_connect(socket, endpoints, [&](const boost::system::error_code& e, const tcp::endpoint&) {
      ec = e;
      done = true;
    });
    if (run(io, done, left(connect_deadline), [&] { socket.close(); })) throw error(no_answer_connect);
    if (ec) throw error("cannot reach the faucets server at " + url + ": " + ec.message());

    // The request.
    bhttp::request<bhttp::string_body> req{method, options.url.prefix + target, 11};
    const bool v6 = options.url.host.find(':') != std::string::npos;
    req.set(bhttp::field::host, (v6 ? "[" + options.url.host + "]" : options.url.host) + ":" +
                                    std::to_string(options.url.port));
    req.set(bhttp::field::user_agent, options.user_agent);
    req.set(bhttp::field::accept, "application/json");
    req.set(bhttp::field::connection, "close");
    if (!options.token.empty()) req.set(bhttp::field::authorization, "Bearer " + options.token);
    if (body) {
      req.set(bhttp::field::content_type, "application/json");
      req.body() = *body;
    }
    req.prepare_payload();

    if (!tls) return talk(io, socket, socket, req, url);

    ssl::stream<tcp::socket&> stream(socket, *tls);
    SSL* handle = stream.native_handle();
    X509_VERIFY_PARAM* param = SSL_get0_param(handle);
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    const bool ip = is_ip_address(options.url.host);
    if (ip) {
      X509_VERIFY_PARAM_set1_ip_asc(param, options.url.host.c_str());
    } else {
      X509_VERIFY_PARAM_set1_host(param, options.url.host.c_str(), 0);
      // SNI (SSL_set_tlsext_host_name, a macro with a C cast).
      SSL_ctrl(handle, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
               const_cast<char*>(options.url.host.c_str()));
    }
    done = false;
    stream.async_handshake(ssl::stream_base::client, [&](const boost::system::error_code& e) {
      ec = e;
      done = true;
    });
    if (run(io, done, left(connect_deadline), [&] { socket.close(); })) {
      throw error("no TLS handshake with the faucets server at " + url + " within " +
                  seconds_text(options.connect_timeout) + " (is it serving https?)");
    }
    if (ec) {
      const long verify = SSL_get_verify_result(handle);
      if (verify != X509_V_OK) {
        throw error("cannot verify the faucets server's certificate at " + url + ": " +
                    X509_verify_cert_error_string(verify) +
                    (options.ca_file ? " (checked against the CA file '" + *options.ca_file + "')"
                                     : std::string(" (give its CA with --faucets-ca FILE or AQS_FAUCETS_CA)")));
      }
      std::string why = ec.message();
      if (ec.category() == asio::error::get_ssl_category()) {
        const auto reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
        if (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
            reason == SSL_R_HTTP_REQUEST) {
          why += " (is it serving plain http? then use http://, on this machine only)";
        }
      }
      throw error("TLS handshake with the faucets server at " + url + " failed: " + why);
    }
    return talk(io, socket, stream, req, url);
  }

  template <class Stream>
  answer talk(asio::io_context& io, tcp::socket& socket, Stream& stream, bhttp::request<bhttp::string_body>& req,
              const std::string& url) {
    const auto deadline = std::chrono::steady_clock::now() + options.timeout;
    auto left = [&] {
      return std::max(std::chrono::milliseconds(1), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                        deadline - std::chrono::steady_clock::now()));
    };
    const std::string late =
        "the faucets server at " + url + " did not answer within " + seconds_text(options.timeout);
    boost::system::error_code write_ec, ec;
    bool done = false;
    bhttp::async_write(stream, req, [&](const boost::system::error_code& e, std::size_t) {
      write_ec = e;
      done = true;
    });
    if (run(io, done, left(), [&] { socket.close(); })) throw error(late);
    // A server that refuses early (413, 401) may close before it has read
    // everything: its answer is read all the same.
    beast::flat_buffer buffer;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.body_limit(std::uint64_t{1} << 30);
    done = false;
    if (socket.is_open()) {
      bhttp::async_read(stream, buffer, parser, [&](const boost::system::error_code& e, std::size_t) {
        ec = e;
        done = true;
      });
      if (run(io, done, left(), [&] { socket.close(); })) throw error(late);
    }
    if (ec || !parser.is_done()) {
      const auto& shown = write_ec ? write_ec : ec;
      throw error("lost the connection to the faucets server at " + url + ": " +
                  (shown ? shown.message() : std::string("incomplete answer")));
    }
    answer a;
    const auto& res = parser.get();
    a.status = static_cast<int>(res.result_int());
    a.reason = std::string(res.reason());
    a.body = res.body();
    boost::system::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    return a;
  }
};

client::client(client_options options) : impl_(std::make_unique<impl>()) {
  impl_->options = std::move(options);
  if (impl_->options.url.host.empty()) throw error("no faucets server URL given");
  if (!impl_->options.url.tls && !is_loopback_host(impl_->options.url.host)) {
    throw error("refusing plain http:// to '" + impl_->options.url.host + "': use https://");
  }
  if (!impl_->options.url.tls) return;
  impl_->tls.emplace(ssl::context::tls_client);
  auto& ctx = *impl_->tls;
  ctx.set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                  ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
  ctx.set_verify_mode(ssl::verify_peer);
  boost::system::error_code ec;
  if (impl_->options.ca_file) {
    const std::string& f = *impl_->options.ca_file;
    std::string why;
    int err = 0;
    if (!read_small_file(f, why, err)) {
      throw error("cannot read the CA file '" + one_line(f, 200) + "' (--faucets-ca or AQS_FAUCETS_CA): " + why);
    }
    ctx.load_verify_file(f, ec);
    if (ec) {
      throw error("cannot use the CA file '" + one_line(f, 200) + "' (--faucets-ca or AQS_FAUCETS_CA): " +
                  ec.message() + " (expected PEM certificates)");
    }
  } else {
    ctx.set_default_verify_paths(ec);
    if (ec) throw error("cannot load the system's CA certificates: " + ec.message() + " (give one with --faucets-ca FILE)");
  }
}

client::~client() = default;
client::client(client&&) noexcept = default;
client& client::operator=(client&&) noexcept = default;

const client_options& client::options() const noexcept { return impl_->options; }

nlohmann::json client::call(std::string_view method, const std::string& target, const std::optional<nlohmann::json>& body) {
  const bhttp::verb verb = bhttp::string_to_verb(beast::string_view(method.data(), method.size()));
  if (verb == bhttp::verb::unknown) throw error("unknown HTTP method '" + one_line(method, 20) + "'");
  std::optional<std::string> text;
  if (body) text = body->dump();
  const impl::answer a = impl_->exchange(verb, target, text);
  if (a.status < 200 || a.status > 299) throw error(http_error_message(a.status, a.body, a.reason), a.status);
  if (a.body.empty()) return nullptr;
  auto j = nlohmann::json::parse(a.body, nullptr, false);
  if (j.is_discarded()) {
    throw error("unreadable answer from the faucets server at " + impl_->where() + " (" + target +
                "): not JSON: " + one_line(a.body, 80));
  }
  return j;
}

namespace {

[[noreturn]] void unexpected(const std::string& target, const std::string& what) {
  throw error("unexpected answer from the faucets server to " + target + ": " + what);
}

const nlohmann::json& member(const nlohmann::json& j, const char* key, const std::string& target) {
  if (!j.is_object() || !j.contains(key)) unexpected(target, std::string("no \"") + key + "\"");
  return j.at(key);
}

std::int64_t integer(const nlohmann::json& j, const char* key, const std::string& target) {
  const auto& v = member(j, key, target);
  if (!v.is_number_integer()) unexpected(target, std::string("\"") + key + "\" is not an integer");
  return v.get<std::int64_t>();
}

std::optional<std::string> optional_text(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

nlohmann::json array_member(const nlohmann::json& j, const char* key, const std::string& target) {
  const auto& v = member(j, key, target);
  if (!v.is_array()) unexpected(target, std::string("\"") + key + "\" is not an array");
  return v;
}

}  // namespace

submitted client::submit(std::string_view cluster, const nlohmann::json& job, const std::optional<std::string>& broker,
                         const nlohmann::json& contract, const nlohmann::json& stage_in) {
  const std::string target = "/api/v1/jobs";
  nlohmann::json body = {{"cluster", std::string(cluster)}, {"job", job}};
  if (broker) body["broker"] = *broker;
  if (!contract.is_null()) body["contract"] = contract;
  if (!stage_in.is_null()) body["stage_in"] = stage_in;
  submitted s;
  s.json = call("POST", target, body);
  s.id = integer(s.json, "id", target);
  s.gid = optional_text(s.json, "gid");
  s.cluster = optional_text(s.json, "cluster");
  s.state = optional_text(s.json, "state").value_or("PENDING");
  return s;
}

nlohmann::json client::list_jobs(bool all, const std::optional<std::string>& cluster) {
  std::string target = "/api/v1/jobs";
  std::string query;
  if (all) query += "all=1";
  if (cluster) query += (query.empty() ? "" : "&") + std::string("cluster=") + url_encode(*cluster);
  if (!query.empty()) target += "?" + query;
  return array_member(call("GET", target), "jobs", target);
}

nlohmann::json client::outputs(std::int64_t id) {
  const std::string target = "/api/v1/jobs/" + std::to_string(id) + "/outputs";
  auto j = call("GET", target);
  if (!j.is_object()) unexpected(target, "not an object");
  return j;
}

nlohmann::json client::job(std::int64_t id) {
  const std::string target = "/api/v1/jobs/" + std::to_string(id);
  auto j = call("GET", target);
  if (!j.is_object()) unexpected(target, "not a job object");
  return j;
}

nlohmann::json client::history(std::int64_t id) {
  const std::string target = "/api/v1/jobs/" + std::to_string(id) + "/history";
  return array_member(call("GET", target), "events", target);
}

cancelled client::cancel(std::int64_t id) {
  const std::string target = "/api/v1/jobs/" + std::to_string(id) + "/cancel";
  cancelled c;
  c.json = call("POST", target);
  c.id = c.json.is_object() && c.json.contains("id") ? integer(c.json, "id", target) : id;
  c.state = c.json.is_object() ? optional_text(c.json, "state").value_or("") : "";
  return c;
}

nlohmann::json client::clusters() {
  const std::string target = "/api/v1/clusters";
  return array_member(call("GET", target), "clusters", target);
}

}  // namespace aqs::client::faucets
