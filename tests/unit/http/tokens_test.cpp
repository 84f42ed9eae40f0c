// Bearer tokens: what verifies, what does not (expired, forged, revoked), and
// revocations that survive a restart.
#include <doctest/doctest.h>

#include "daemon_base/token_authority.hpp"
#include "temp_dir.hpp"

#include <fstream>
#include <sys/stat.h>

using aqs::daemon::token_authority;
using aqs::daemon::token_claims;

namespace {

constexpr std::int64_t k_now = 1'763'900'000'000'000;  // µs
constexpr std::int64_t k_second = 1'000'000;

bool valid(const token_authority& a, const std::string& token, std::int64_t now = k_now) {
  return std::holds_alternative<token_claims>(a.verify(token, now));
}
std::string refusal(const token_authority& a, const std::string& token, std::int64_t now = k_now) {
  auto v = a.verify(token, now);
  auto* why = std::get_if<std::string>(&v);
  return why ? *why : "";
}

}  // namespace

TEST_CASE("a token verifies to the user, uid, expiry and id it was issued with") {
  token_authority a("cluster-key");
  auto [token, claims] = a.issue(1000, "alice", 600, k_now);
  CHECK(token.starts_with("aqs1."));
  CHECK(claims.id.size() == 32);
  auto v = a.verify(token, k_now + k_second);
  REQUIRE(std::holds_alternative<token_claims>(v));
  CHECK(std::get<token_claims>(v) == claims);
  CHECK(claims.expires_at == k_now / k_second + 600);
}

TEST_CASE("a token is refused once it has expired") {
  token_authority a("cluster-key");
  auto [token, claims] = a.issue(1000, "alice", 60, k_now);
  CHECK(valid(a, token, k_now + 59 * k_second));
  CHECK(refusal(a, token, k_now + 60 * k_second) == "token expired");
}

TEST_CASE("a token signed with another cluster key, or with any byte changed, is refused") {
  token_authority a("cluster-key");
  token_authority other("another-key");
  auto [token, claims] = other.issue(0, "root", 600, k_now);
  CHECK(refusal(a, token) == "bad token signature");
  auto [mine, c2] = a.issue(1000, "alice", 600, k_now);
  // Claiming uid 0 in the payload breaks the signature.
  for (std::size_t i = 5; i < mine.size(); i += 7) {
    std::string forged = mine;
    forged[i] = forged[i] == 'A' ? 'B' : 'A';
    CAPTURE(i);
    CHECK_FALSE(valid(a, forged));
  }
  CHECK(refusal(a, "") == "malformed token");
  CHECK(refusal(a, "aqs1.") == "malformed token");
  CHECK(refusal(a, "Bearer x") == "malformed token");
  CHECK_FALSE(valid(a, mine.substr(0, mine.rfind('.'))));
}

TEST_CASE("a user revokes their own token by id, and another user's revocation of it changes nothing") {
  token_authority a("k");
  auto [t1, c1] = a.issue(1000, "alice", 600, k_now);
  auto [t2, c2] = a.issue(1000, "alice", 600, k_now);
  CHECK_FALSE(a.revoke(1001, c1.id, k_now));  // bob names alice's token: refused, nothing happens to it
  CHECK(valid(a, t1));
  CHECK_FALSE(a.revoke(1000, "0123456789abcdef0123456789abcdef", k_now));  // never issued: refused
  CHECK(a.revoke(1000, c1.id, k_now));
  CHECK(refusal(a, t1) == "token revoked");
  CHECK(valid(a, t2));
}

TEST_CASE("root revokes anyone's token, and revoke-all ends every token issued until then") {
  token_authority a("k");
  auto [t1, c1] = a.issue(1000, "alice", 600, k_now);
  auto [t2, c2] = a.issue(1000, "alice", 600, k_now + 1);
  a.revoke(std::nullopt, c1.id, k_now + 2);
  CHECK_FALSE(valid(a, t1));
  CHECK(valid(a, t2));
  a.revoke_all(1000, k_now + 3);
  CHECK_FALSE(valid(a, t2));
  auto [t3, c3] = a.issue(1000, "alice", 600, k_now + 4);
  CHECK(valid(a, t3));
  auto [t4, c4] = a.issue(1001, "bob", 600, k_now);
  CHECK(valid(a, t4));
}

TEST_CASE("revocations are kept in their file and read back by the next daemon") {
  aqs::test::temp_dir dir;
  const auto file = dir.path() / "revoked-tokens";
  std::string t1, t2, t3;
  {
    token_authority a("k", file);
    auto i1 = a.issue(1000, "alice", 600, k_now);
    auto i2 = a.issue(1001, "bob", 600, k_now);
    auto i3 = a.issue(1002, "carol", 600, k_now);
    t1 = i1.first;
    t2 = i2.first;
    t3 = i3.first;
    a.revoke(1000, i1.second.id, k_now);
    a.revoke_all(1001, k_now + 1);
  }
  token_authority b("k", file, k_now + 2);  // read back while the tokens are valid
  CHECK_FALSE(valid(b, t1));
  CHECK_FALSE(valid(b, t2));
  CHECK(valid(b, t3));
  CHECK((std::filesystem::status(file).permissions() & std::filesystem::perms::others_read) == std::filesystem::perms::none);
}

TEST_CASE("an expired token cannot be revoked by its user: there is nothing left to revoke") {
  token_authority a("k");
  auto [t1, c1] = a.issue(1000, "alice", 60, k_now);
  CHECK_FALSE(a.revoke(1000, c1.id, k_now + 61 * k_second));
}

TEST_CASE("a revocation is one line appended to the file, not a rewrite of it") {
  aqs::test::temp_dir dir;
  const auto file = dir.path() / "revoked-tokens";
  token_authority a("k", file);
  auto [t1, c1] = a.issue(1000, "alice", 600, k_now);
  auto [t2, c2] = a.issue(1000, "alice", 600, k_now);
  struct stat before {};
  REQUIRE(::stat(file.c_str(), &before) == 0);
  CHECK(a.revoke(1000, c1.id, k_now));
  struct stat after {};
  REQUIRE(::stat(file.c_str(), &after) == 0);
  CHECK(after.st_ino == before.st_ino);  // the same file, grown
  CHECK(after.st_size > before.st_size);
  CHECK((after.st_mode & 0777) == 0600);
}

TEST_CASE("the revocation file stays bounded by the tokens alive: expired entries are dropped") {
  aqs::test::temp_dir dir;
  const auto file = dir.path() / "revoked-tokens";
  std::int64_t now = k_now;
  {
    token_authority a("k", file);
    // 20,000 tokens of a minute each, one issued and revoked every 2 s: at
    // any time about 30 are alive.
    for (int i = 0; i < 20'000; ++i, now += 2 * k_second) {
      auto [t, c] = a.issue(1000, "alice", 60, now);
      CHECK(a.revoke(1000, c.id, now));
    }
    CHECK(a.entries() < 2 * 1024 + 100);
  }
  auto lines = [&] {
    std::ifstream in(file);
    std::size_t n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  };
  CHECK(lines() < 3 * 1024 + 200);
  // Read back an hour later: everything it held has expired, and the file is
  // written again without it.
  token_authority b("k", file, now + 3600 * k_second);
  CHECK(b.entries() == 0);
  CHECK(lines() == 0);
}
