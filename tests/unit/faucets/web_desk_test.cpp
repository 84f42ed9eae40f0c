// web_desk over fake cluster links: a quote checks its input before asking
// any cluster, asks every eligible one for its bid and believes only the
// cluster asked; a view asks the job's own cluster, as its local user.
#include <doctest/doctest.h>

#include <chrono>
#include <future>
#include <map>
#include <utility>  // before Boost.Asio's awaitable.hpp, which needs std::exchange

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_future.hpp>

#include "server/web_desk.hpp"

using namespace aqs::faucets;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

class links final : public cluster_links {
public:
  std::map<std::string, std::int64_t> size{{"big", 8}, {"small", 2}, {"silent", 8}};
  std::vector<std::pair<std::string, json>> sent;
  std::vector<std::string> names() const override { return {"big", "silent", "small"}; }
  bool knows(const std::string& c) const override { return size.contains(c); }
  bool connected(const std::string& c) const override { return knows(c); }
  bool send(const std::string& c, json m) override {
    sent.emplace_back(c, std::move(m));
    return true;
  }
  std::vector<cluster_view> views() const override {
    std::vector<cluster_view> out;
    for (const auto& [n, p] : size) {
      cluster_view v;
      v.name = n;
      v.procs_total = v.procs_free = v.max_job_procs = p;
      out.push_back(v);
    }
    return out;
  }
  bool all_reported() const override { return true; }
  void note_placed(const std::string&, std::int64_t) override {}
};

json job_of(std::int64_t procs) {
  return json{{"name", "j"}, {"script", "#!/bin/sh\ntrue\n"}, {"workdir", "/tmp"}, {"min_pe", procs}, {"max_pe", procs}};
}

struct fixture {
  boost::asio::io_context io;
  links hub;
  user_map users = user_map::parse("* * *\n", "test");
  web_desk desk{io, hub, users, 300ms};

  // Runs `a` to its end, letting `between` answer for the clusters once it waits.
  template <class Awaitable, class Between>
  desk_answer run(Awaitable a, Between between) {
    io.restart();
    auto f = boost::asio::co_spawn(io, std::move(a), boost::asio::use_future);
    io.poll();
    between();
    io.run();
    return f.get();
  }
  desk_answer run_quote(const json& body, const std::string& owner = "alice") {
    return run(desk.quote(owner, body), [] {});
  }
};

}  // namespace

TEST_CASE("a quote with bad input is refused in one line and asks no cluster") {
  fixture f;
  const auto why = [&](const json& body, const std::string& owner = "alice") {
    const auto a = f.run_quote(body, owner);
    REQUIRE(std::holds_alternative<std::string>(a));
    return std::get<std::string>(a);
  };
  CHECK(why(json{{"job", job_of(-1)}}) == "field 'job.min_pe' must be in 1..1048576");
  CHECK(why(json{{"cluster", "nowhere"}, {"job", job_of(1)}}) ==
        "no cluster 'nowhere' at this Faucets server (known: big, silent, small)");
  CHECK(why(json{{"job", job_of(1)}, {"contract", {{"deadline", 1.0e9}, {"max_price", 1}, {"value", 1}}}})
            .starts_with("the contract's deadline is in the past"));
  CHECK(why(json{{"job", job_of(1)}, {"contract", {{"deadline", 4.0e9}, {"max_price", -1}, {"value", 1}}}})
            .starts_with("the contract's max_price must be"));
  CHECK(why(json{{"job", job_of(1)}}, "root").starts_with("faucetsd never runs a job as root"));
  CHECK(why(json{{"cluster", 3}, {"job", job_of(1)}}) == "cluster must be a string");
  CHECK(why(json::array()) == "the body must be {\"cluster\": \"auto\"|NAME, \"job\": {...}}");
  CHECK(f.hub.sent.empty());
}

TEST_CASE("a quote asks every cluster that could run the job for its bid, believes only the cluster asked, and leaves "
          "out the small and the silent with the reason") {
  fixture f;
  const auto a = f.run(f.desk.quote("alice", json{{"job", job_of(4)}}), [&] {
    REQUIRE(f.hub.sent.size() == 2);  // big and silent; small cannot ever run 4
    for (const auto& [c, m] : f.hub.sent) {
      CHECK(m["type"] == "estimate");
      CHECK(m["qid"].get<std::int64_t>() >= k_desk_qid_base);
      CHECK(m["min_pe"] == 4);
    }
    const auto& [c0, m0] = f.hub.sent[0];
    const std::string other = c0 == "big" ? "silent" : "big";
    // Another cluster answering big's question: ignored.
    f.desk.on_answer(other, "estimate_reply", json{{"qid", m0["qid"]}, {"start_in_s", 999}});
    f.desk.on_answer(c0, "estimate_reply", json{{"qid", m0["qid"]}, {"start_in_s", 12.5}, {"completion_in_s", 40},
                                                {"price", 2}});
  });
  REQUIRE(std::holds_alternative<json>(a));
  std::map<std::string, json> rows;
  for (const auto& r : std::get<json>(a)["clusters"]) rows[r["name"]] = r;
  REQUIRE(rows.size() == 3);
  const std::string answered = f.hub.sent[0].first;
  const std::string silent = answered == "big" ? "silent" : "big";
  CHECK(rows[answered]["start_in_s"] == 12.5);
  CHECK(rows[answered]["completion_in_s"] == 40);
  CHECK(rows[answered]["price"] == 2);
  CHECK(rows[silent]["start_in_s"].is_null());
  CHECK(rows[silent]["why"] == "no answer within 300 ms");
  CHECK(rows["small"]["eligible"] == false);
  CHECK(rows["small"]["why"] == "too small for this job (at most 2 processors)");
}

TEST_CASE("a view asks the job's own cluster as its local user, and says why when it is on none or refused") {
  fixture f;
  stored_job j;
  j.id = 7;
  j.owner = "alice";
  j.name = "hello";
  j.state = "PENDING";
  j.submit = json{{"type", "submit"}, {"job", {{"workdir", "/home/alice"}, {"stdout", "out-%j.txt"}}}}.dump();
  auto a = f.run(f.desk.view(j, "output", 0, 100), [] {});
  CHECK(std::get<std::string>(a) == "job 7 is on no cluster yet (PENDING)");
  CHECK(f.hub.sent.empty());
  j.cluster = "big";
  j.local_id = 42;
  a = f.run(f.desk.view(j, "output", 0, 100), [&] {
    REQUIRE(f.hub.sent.size() == 1);
    const auto& [c, m] = f.hub.sent[0];
    CHECK(c == "big");
    CHECK(m["type"] == "job_view");
    CHECK(m["job_id"] == 42);
    CHECK(m["local_user"] == "alice");
    CHECK(m["workdir"] == "/home/alice");
    CHECK(m["stdout"] == "out-%j.txt");
    CHECK(m["bytes"] == 100);
    f.desk.on_answer("big", "job_view_reply", json{{"qid", m["qid"]}, {"error", "no job 42 of alice here"}});
  });
  CHECK(std::get<std::string>(a) == "big: no job 42 of alice here");
  f.hub.sent.clear();
  a = f.run(f.desk.view(j, "values", 5, 0), [&] {
    const auto& [c, m] = f.hub.sent.at(0);
    CHECK(m["since"] == 5);
    f.desk.on_answer("big", "job_view_reply",
                     json{{"qid", m["qid"]}, {"values", {{"series", {{"r", {{"total", 1}}}}}}}});
  });
  REQUIRE(std::holds_alternative<json>(a));
  CHECK(std::get<json>(a)["values"]["series"]["r"]["total"] == 1);
  CHECK(std::get<json>(a)["cluster"] == "big");
}
