// The tokens part alone (http_tokens), in virtual time: ftoken's issue and
// revoke requests answered on a fake connection, the token they yield
// checked with the part's own authority. No sockets, no database.
#include <doctest/doctest.h>

#include <variant>

#include "daemon/http_tokens.hpp"
#include "daemon_base/unix_user.hpp"
#include "fake_connection.hpp"
#include "manual_clock.hpp"
#include "protocol/replies.hpp"

using namespace aqs;
using namespace std::chrono_literals;

namespace {

constexpr std::string_view k_key = "0123456789abcdef0123456789abcdef";

struct rig {
  test::manual_clock clock;
  daemon::http_tokens tokens{std::string(k_key), std::nullopt, 3600, clock};

  std::shared_ptr<test::fake_connection> user(uid_t uid) {
    return std::make_shared<test::fake_connection>(protocol::peer_role::client, uid);
  }
  protocol::token_reply issue(const std::shared_ptr<test::fake_connection>& c, std::int64_t id,
                              std::optional<std::int64_t> lifespan = std::nullopt) {
    protocol::issue_token m;
    m.id = id;
    m.lifespan_s = lifespan;
    tokens.handle_issue(c, m);
    auto reply = c->reply(id, 0ms);
    REQUIRE(reply);
    REQUIRE(std::holds_alternative<protocol::ok>(*reply));
    return protocol::read_reply<protocol::token_reply>(std::get<protocol::ok>(*reply));
  }
  // The reply to a revoke: nullopt for ok, else the error's code.
  std::optional<protocol::error_code> revoke(const std::shared_ptr<test::fake_connection>& c, std::int64_t id,
                                             std::optional<std::string> token_id, bool all = false) {
    protocol::revoke_token m;
    m.id = id;
    m.token_id = std::move(token_id);
    m.all = all;
    tokens.handle_revoke(c, m);
    auto reply = c->reply(id, 0ms);
    REQUIRE(reply);
    if (std::holds_alternative<protocol::ok>(*reply)) return std::nullopt;
    return std::get<protocol::error>(*reply).code;
  }
  bool valid(const std::string& token) const {
    return std::holds_alternative<daemon::token_claims>(tokens.authority().verify(token, clock.wall_us()));
  }
  std::string why_refused(const std::string& token) const {
    auto v = tokens.authority().verify(token, clock.wall_us());
    return std::holds_alternative<std::string>(v) ? std::get<std::string>(v) : std::string();
  }
};

}  // namespace

TEST_CASE("http_tokens: a token is issued as the peer's uid, for the default or the asked lifespan") {
  rig r;
  auto c = r.user(4242);
  const auto t = r.issue(c, 1);
  CHECK(t.uid == 4242);
  CHECK(t.user == daemon::user_name_of(4242));
  CHECK(t.token_id.size() == 32);
  CHECK(t.expires_at == r.clock.wall_us() / 1'000'000 + 3600);
  auto claims = r.tokens.authority().verify(t.token, r.clock.wall_us());
  REQUIRE(std::holds_alternative<daemon::token_claims>(claims));
  CHECK(std::get<daemon::token_claims>(claims).uid == 4242);
  CHECK(std::get<daemon::token_claims>(claims).id == t.token_id);

  const auto short_lived = r.issue(c, 2, 60);
  CHECK(short_lived.expires_at == r.clock.wall_us() / 1'000'000 + 60);
  CHECK(short_lived.token_id != t.token_id);
}

TEST_CASE("http_tokens: a token expires with the part's clock, not the machine's") {
  rig r;
  auto c = r.user(1000);
  const auto t = r.issue(c, 1, 60);
  CHECK(r.valid(t.token));
  r.clock.advance(59s);
  CHECK(r.valid(t.token));
  r.clock.advance(2s);
  CHECK_FALSE(r.valid(t.token));
  CHECK(r.why_refused(t.token).find("expired") != std::string::npos);
}

TEST_CASE("http_tokens: a user revokes their own token by id, never another user's; root revokes anyone's") {
  rig r;
  auto alice = r.user(1001);
  auto bob = r.user(1002);
  auto root = r.user(0);
  const auto a1 = r.issue(alice, 1);
  const auto a2 = r.issue(alice, 2);
  const auto b1 = r.issue(bob, 3);

  // Bob names Alice's token: not found, and it stays valid.
  CHECK(r.revoke(bob, 10, a1.token_id) == protocol::error_code::not_found);
  CHECK(r.valid(a1.token));
  // Alice revokes her own: only that one goes.
  CHECK(r.revoke(alice, 11, a1.token_id) == std::nullopt);
  CHECK_FALSE(r.valid(a1.token));
  CHECK(r.why_refused(a1.token).find("revoked") != std::string::npos);
  CHECK(r.valid(a2.token));
  CHECK(r.valid(b1.token));
  // Root revokes Bob's.
  CHECK(r.revoke(root, 12, b1.token_id) == std::nullopt);
  CHECK_FALSE(r.valid(b1.token));
}

TEST_CASE("http_tokens: revoke --all ends every token of the caller issued so far, and only theirs") {
  rig r;
  auto alice = r.user(1001);
  auto bob = r.user(1002);
  const auto a1 = r.issue(alice, 1);
  const auto a2 = r.issue(alice, 2);
  const auto b1 = r.issue(bob, 3);
  r.clock.advance(1ms);
  CHECK(r.revoke(alice, 4, std::nullopt, true) == std::nullopt);
  CHECK_FALSE(r.valid(a1.token));
  CHECK_FALSE(r.valid(a2.token));
  CHECK(r.valid(b1.token));
  // A token issued after the revocation is good.
  r.clock.advance(1ms);
  const auto a3 = r.issue(alice, 5);
  CHECK(r.valid(a3.token));
}

TEST_CASE("http_tokens: a malformed token id is a bad request, nothing is revoked") {
  rig r;
  auto alice = r.user(1001);
  const auto a1 = r.issue(alice, 1);
  std::string upper = a1.token_id;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  for (const std::string& bad : {std::string("abc"), upper, a1.token_id + "0", std::string(32, 'g')}) {
    CAPTURE(bad);
    CHECK(r.revoke(alice, 2, bad) == protocol::error_code::bad_request);
  }
  CHECK(r.valid(a1.token));
  // A token signed with another key is refused.
  daemon::token_authority other(std::string(32, 'z'));
  auto [forged, claims] = other.issue(1001, "alice", 3600, r.clock.wall_us());
  CHECK_FALSE(r.valid(forged));
}
