// The job_router without PostgreSQL or sockets: its job records in memory,
// its clusters a fake that records what is sent and answers as the test
// says, on a real io_context. Placement, refusals, updates, starts, a lost
// cluster's queue and its return.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <map>
#include <fstream>
#include <set>

#include <sys/stat.h>

#include <boost/asio/io_context.hpp>

#include "protocol/messages.hpp"
#include "server/job_router.hpp"
#include "temp_dir.hpp"

using namespace aqs::faucets;
using nlohmann::json;

namespace {

// faucets_store's contract, in memory.
class memory_records final : public job_records {
public:
  std::int64_t add_job(const stored_job& j) override {
    stored_job k = j;
    k.id = static_cast<std::int64_t>(jobs.size()) + 1;
    jobs[k.id] = k;
    event(k.id, "submitted", "by " + j.owner);
    return k.id;
  }
  void event(std::int64_t id, const std::string& e, const std::string& detail) override {
    events.push_back({id, e + ": " + detail});
  }
  std::int64_t dispatched(std::int64_t id, const std::string& cluster, const std::string& detail) override {
    const auto attempt = ++jobs.at(id).attempts;
    forwards.insert({id, cluster, attempt});
    event(id, "dispatched", detail);
    return attempt;
  }
  bool forwarded_to(std::int64_t id, const std::string& cluster, std::optional<std::int64_t> attempt) override {
    for (const auto& [job, c, a] : forwards) {
      if (job == id && c == cluster && (!attempt || a == *attempt)) return true;
    }
    return false;
  }
  void placed(std::int64_t id, const std::string& cluster, std::int64_t local_id, const std::string& detail) override {
    jobs.at(id).cluster = cluster;
    jobs.at(id).local_id = local_id;
    event(id, "placed", detail);
  }
  void starting(std::int64_t id, const std::string& detail) override {
    auto& j = jobs.at(id);
    if (!j.start_time) j.start_time = "now";
    if (j.state == "PENDING") j.state = "RUNNING";
    event(id, "starting", detail);
  }
  void update(std::int64_t id, const std::string& state, std::int64_t nprocs, std::optional<std::int64_t> exit_code,
              const std::optional<std::string>& start, const std::optional<std::string>& end) override {
    auto& j = jobs.at(id);
    j.state = state;
    j.nprocs = nprocs;
    if (exit_code) j.exit_code = exit_code;
    if (start) j.start_time = start;
    if (end) j.end_time = end;
  }
  void set_state(std::int64_t id, const std::string& state, const std::string& e, const std::string& detail) override {
    jobs.at(id).state = state;
    event(id, e, detail);
  }
  void unplace(std::int64_t id, const std::string& cluster, std::optional<std::int64_t> local_id,
               const std::string& why) override {
    abandoned_at[{id, cluster}] = local_id;
    auto& j = jobs.at(id);
    j.state = "PENDING";
    j.cluster.reset();
    j.local_id.reset();
    j.nprocs = 0;
    event(id, "unplaced", why);
  }
  std::vector<abandoned_placement> abandoned(const std::string& cluster) override {
    std::vector<abandoned_placement> out;
    for (const auto& [key, local] : abandoned_at) {
      if (key.second == cluster) out.push_back({key.first, cluster, local});
    }
    return out;
  }
  void forget_abandoned(std::int64_t id, const std::string& cluster) override { abandoned_at.erase({id, cluster}); }
  std::vector<stored_job> live_jobs() override {
    std::vector<stored_job> out;
    for (const auto& [id, j] : jobs) {
      if (!is_final_state(j.state)) out.push_back(j);
    }
    return out;
  }
  std::optional<stored_job> job(std::int64_t id) override {
    const auto it = jobs.find(id);
    return it == jobs.end() ? std::nullopt : std::optional<stored_job>(it->second);
  }

  std::map<std::int64_t, stored_job> jobs;
  std::set<std::tuple<std::int64_t, std::string, std::int64_t>> forwards;
  std::map<std::pair<std::int64_t, std::string>, std::optional<std::int64_t>> abandoned_at;
  std::vector<std::pair<std::int64_t, std::string>> events;
};

// Clusters that report 8 free processors each while connected.
class fake_links final : public cluster_links {
public:
  explicit fake_links(std::vector<std::string> names) {
    for (auto& n : names) up[n] = true;
  }
  std::vector<std::string> names() const override {
    std::vector<std::string> out;
    for (const auto& [n, u] : up) out.push_back(n);
    return out;
  }
  bool knows(const std::string& c) const override { return up.contains(c); }
  bool connected(const std::string& c) const override { return knows(c) && up.at(c); }
  bool send(const std::string& c, json m) override {
    if (!connected(c)) return false;
    sent.emplace_back(c, std::move(m));
    return true;
  }
  std::vector<cluster_view> views() const override {
    std::vector<cluster_view> out;
    for (const auto& [n, u] : up) {
      cluster_view v;
      v.name = n;
      v.up = u;
      v.procs_total = v.procs_free = v.max_job_procs = 8;
      if (const auto p = price.find(n); p != price.end()) v.price = p->second;
      out.push_back(v);
    }
    return out;
  }
  bool all_reported() const override { return true; }
  void note_placed(const std::string& c, std::int64_t procs) override { placed[c] += procs; }

  // The messages of `type` sent so far (to any cluster).
  std::vector<std::pair<std::string, json>> of_type(const std::string& type) const {
    std::vector<std::pair<std::string, json>> out;
    for (const auto& [c, m] : sent) {
      if (m.value("type", "") == type) out.emplace_back(c, m);
    }
    return out;
  }

  std::map<std::string, bool> up;
  std::map<std::string, double> price;  // the price each reports
  std::vector<std::pair<std::string, json>> sent;
  std::map<std::string, std::int64_t> placed;
};

json job_message(std::int64_t procs = 2) {
  aqs::protocol::job_spec s;
  s.name = "heat";
  s.script = "#!/bin/sh\ntrue\n";
  s.workdir = "/tmp";
  s.min_pe = s.max_pe = procs;
  return aqs::protocol::to_json(aqs::protocol::submit{1, s});
}

struct fixture {
  boost::asio::io_context io;
  memory_records records;
  fake_links links;
  user_map users = user_map::parse("alice * alice\nbob one bob_one\n", "test");
  job_router router;

  explicit fixture(std::vector<std::string> clusters = {"one"}, std::string policy = "fastest-queue",
                   ledger_book* ledger = nullptr, owners_table owners = {})
      : fixture(std::move(clusters), router_options{.policy = std::move(policy)}, ledger, std::move(owners)) {}
  fixture(std::vector<std::string> clusters, router_options options, ledger_book* ledger = nullptr, owners_table owners = {})
      : links(std::move(clusters)), router(io, records, links, users, std::move(options), ledger, std::move(owners)) {
    router.start();
  }
  ~fixture() {
    router.stop();
    io.restart();
    io.run();  // the router's loop ends; nothing else is pending
  }
  // Runs the router until `done` (a bound on the loop, not on the time it takes).
  void run_until(const std::function<bool()>& done) {
    for (int i = 0; i < 2000 && !done(); ++i) {
      io.restart();
      io.run_for(std::chrono::milliseconds(5));
    }
    REQUIRE(done());
  }
  std::int64_t submit(const std::string& owner = "alice", const std::string& cluster = "auto") {
    std::string why;
    const auto id = router.submit(owner, cluster, job_message(), &why);
    REQUIRE_MESSAGE(id != 0, why);
    return id;
  }
  // The forward of job `id` once sent (to whichever cluster).
  std::pair<std::string, json> forward_of(std::int64_t id, std::size_t nth = 0) {
    std::vector<std::pair<std::string, json>> mine;
    run_until([&] {
      mine.clear();
      for (auto& f : links.of_type("forward")) {
        if (f.second["fid"] == id) mine.push_back(f);
      }
      return mine.size() > nth;
    });
    return mine[nth];
  }
  // Job `id` forwarded and answered as `local_id` there: its cluster, and
  // the other one (when there are two).
  std::pair<std::string, std::string> place(std::int64_t id, std::int64_t local_id) {
    const auto on = forward_of(id).first;
    say(on, "forwarded", {{"fid", id}, {"job_id", local_id}});
    run_until([&] { return records.jobs.at(id).local_id == local_id; });
    return {on, on == "one" ? "two" : "one"};
  }
  void say(const std::string& cluster, const std::string& type, json m) {
    m["type"] = type;
    router.job_message(cluster, type, m);
  }
};

}  // namespace

TEST_CASE("a queued job is forwarded as its user's local account, and placed when the cluster answers") {
  fixture f;
  const auto id = f.submit();
  const auto [cluster, fwd] = f.forward_of(id);
  CHECK(cluster == "one");
  CHECK(fwd["attempt"] == 1);
  CHECK(fwd["local_user"] == "alice");
  CHECK(fwd["submit"]["job"]["name"] == "heat");
  f.say("one", "forwarded", {{"fid", id}, {"job_id", 77}});
  f.run_until([&] { return f.records.jobs.at(id).local_id == 77; });
  CHECK(f.records.jobs.at(id).cluster == "one");
  CHECK(f.links.placed["one"] == 2);
}

TEST_CASE("a refused job goes to the next cluster, and one refused by every cluster fails naming them") {
  fixture f({"one", "two"});
  const auto id = f.submit();
  const auto first = f.forward_of(id, 0).first;
  f.say(first, "refused", {{"fid", id}, {"error", "no"}});
  const auto second = f.forward_of(id, 1).first;
  CHECK(second != first);
  f.say(second, "refused", {{"fid", id}, {"error", "no either"}});
  f.run_until([&] { return f.records.jobs.at(id).state == "FAILED"; });
  CHECK(f.records.events.back().second == "failed: refused by every cluster it may use (one, two)");
}

TEST_CASE("updates follow the placement; another cluster's claim on the job changes nothing") {
  fixture f({"one", "two"});
  const auto id = f.submit();
  const auto [placed_on, other] = f.place(id, 5);
  const auto update = [&](const std::string& c, std::int64_t local, const std::string& state) {
    job_update u;
    u.fid = id;
    u.job_id = local;
    u.state = state;
    u.nprocs = 2;
    f.say(c, "job_update", to_json(u));
  };
  update(placed_on, 5, "RUNNING");
  CHECK(f.records.jobs.at(id).state == "RUNNING");
  update(other, 9, "COMPLETED");  // never forwarded there
  CHECK(f.records.jobs.at(id).state == "RUNNING");
  update(placed_on, 5, "OUT_OF_MEMORY");
  CHECK(f.records.jobs.at(id).state == "OUT_OF_MEMORY");
  update(placed_on, 5, "RUNNING");  // an ended job stays ended
  CHECK(f.records.jobs.at(id).state == "OUT_OF_MEMORY");
}

TEST_CASE("only the job's placement may start it; a copy elsewhere is told no") {
  fixture f({"one", "two"});
  const auto id = f.submit();
  const auto [placed_on, other] = f.place(id, 5);
  f.say(other, "start", {{"fid", id}, {"job_id", 5}});
  REQUIRE(f.links.of_type("start_no").size() == 1);
  CHECK(f.links.of_type("start_no")[0].first == other);
  CHECK_FALSE(f.records.jobs.at(id).start_time);
  f.say(placed_on, "start", {{"fid", id}, {"job_id", 5}});
  REQUIRE(f.links.of_type("start_ok").size() == 1);
  CHECK(f.records.jobs.at(id).state == "RUNNING");
}

TEST_CASE("a lost cluster's queued job returns to the queue, and its copy is cancelled when the cluster is back") {
  fixture f;
  const auto id = f.submit();
  f.place(id, 5);
  f.links.up["one"] = false;
  f.router.cluster_down("one");
  f.router.cluster_lost("one");
  CHECK_FALSE(f.records.jobs.at(id).cluster);
  CHECK(f.records.abandoned_at.at({id, "one"}) == 5);
  // Cancelled while away: nothing can be sent, so its copy is cancelled on return.
  REQUIRE_FALSE(f.router.cancel(f.records.jobs.at(id)));
  CHECK(f.records.jobs.at(id).state == "CANCELLED");
  f.links.up["one"] = true;
  f.router.cluster_up("one");
  const auto cancels = f.links.of_type("cancel");
  REQUIRE(cancels.size() == 1);
  CHECK(cancels[0].second["job_id"] == 5);
  CHECK(cancels[0].second["local_user"] == "alice");
  CHECK(f.records.abandoned_at.empty());
  REQUIRE(f.links.of_type("follow").size() == 1);
  CHECK(f.links.of_type("follow")[0].second["jobs"].empty());
}

TEST_CASE("a submission the router can never place is refused at once, with the reason") {
  fixture f({"one", "two"});
  std::string why;
  CHECK(f.router.submit("alice", "three", job_message(), &why) == 0);
  CHECK(why == "no cluster 'three' at this Faucets server (known: one, two)");
  CHECK(f.router.submit("root", "auto", job_message(), &why) == 0);
  CHECK(why.find("never runs a job as root") != std::string::npos);
  CHECK(f.router.submit("bob", "two", job_message(), &why) == 0);
  CHECK(why == "user 'bob' may not run jobs on cluster 'two' (the admin's user table)");
  CHECK(f.router.submit("carol", "auto", job_message(), &why) == 0);
  CHECK(why == "the admin's user table lets user 'carol' run on no cluster of this server");
  auto interactive = job_message();
  interactive["job"]["interactive"] = true;
  CHECK(f.router.submit("alice", "auto", interactive, &why) == 0);
  CHECK(why == "interactive jobs (frun) cannot go through the Faucets server");
  CHECK(f.records.jobs.empty());
}

TEST_CASE("a job's own broker plugin ranks its clusters; a failing one is logged and the server's policy decides") {
  aqs::test::temp_dir dir("aqs-router-plugins", 0755);
  auto plugin = [&](const std::string& name, const std::string& body) {
    const auto p = dir.path() / name;
    std::ofstream(p) << "#!/bin/sh\n" << body << "\n";
    ::chmod(p.c_str(), 0755);
  };
  plugin("pick-two", "cat >/dev/null; echo '{\"ranked\": [\"two\", \"one\"], \"reason\": \"two first\"}'");
  plugin("fails", "echo 'broken' >&2; exit 1");
  plugin_options po;
  po.dir = dir.path();
  po.limits.time_limit = std::chrono::seconds(5);
  router_options o{.policy = "fastest-queue"};
  o.plugins = std::make_shared<const plugin_host>(po);
  o.job_plugins = {"pick-two", "fails"};
  fixture f({"one", "two"}, o);
  auto history = [&](std::int64_t id) {
    std::string out;
    for (const auto& [job, line] : f.records.events) {
      if (job == id) out += line + "\n";
    }
    return out;
  };
  std::string why;
  json m = job_message();
  m["broker"] = "pick-two";
  const auto picked = f.router.submit("alice", "auto", m, &why);
  REQUIRE_MESSAGE(picked != 0, why);
  // fastest-queue alone would take "one" (a tie, broken by name).
  CHECK(f.forward_of(picked).first == "two");
  CHECK(history(picked).find("dispatched: to two as alice by plugin:pick-two: two first") != std::string::npos);
  f.say("two", "forwarded", {{"fid", picked}, {"job_id", 5}});  // placed: the next job's turn
  m["broker"] = "plugin:fails";
  const auto failed = f.router.submit("alice", "auto", m, &why);
  REQUIRE_MESSAGE(failed != 0, why);
  CHECK(f.forward_of(failed).first == "one");
  CHECK(history(failed).find("broker: plugin fails ignored: exited with status 1: broken; fastest-queue decides") !=
        std::string::npos);
  CHECK(history(failed).find("by fastest-queue") != std::string::npos);
  // Names the admin did not list, and paths, are refused before anything is queued.
  const auto before = f.records.jobs.size();
  m["broker"] = "other";
  CHECK(f.router.submit("alice", "auto", m, &why) == 0);
  CHECK(why == "broker plugin 'other' is not one this server lets a job choose (allowed: fails, pick-two)");
  m["broker"] = "../../usr/bin/id";
  CHECK(f.router.submit("alice", "auto", m, &why) == 0);
  CHECK(why.find("no '/' or '..'") != std::string::npos);
  m["broker"] = 3;
  CHECK(f.router.submit("alice", "auto", m, &why) == 0);
  CHECK(f.records.jobs.size() == before);
}

TEST_CASE("a router asked for plugins without a plugin directory refuses to start, and one without a job list refuses every job's broker") {
  boost::asio::io_context io;
  memory_records records;
  fake_links links({"one"});
  const user_map users = user_map::parse("alice * alice\n", "test");
  CHECK_THROWS_AS(job_router(io, records, links, users, router_options{.policy = "plugin:x"}), std::invalid_argument);
  fixture f;
  json m = job_message();
  m["broker"] = "x";
  std::string why;
  CHECK(f.router.submit("alice", "auto", m, &why) == 0);
  CHECK(why == "this Faucets server lets no job choose its broker (the admin's --allow-job-plugins)");
}

// ---- the market: contracts, bids, prices, charges, debt limits -------------

namespace {

class memory_ledger final : public ledger_book {
public:
  void agree_price(std::int64_t id, const std::string& cluster, double price) override { prices[{id, cluster}] = price; }
  std::optional<double> agreed_price(std::int64_t id, const std::string& cluster) override {
    const auto it = prices.find({id, cluster});
    return it == prices.end() ? std::nullopt : std::optional<double>(it->second);
  }
  bool charge(const ledger_entry& e, const std::string& detail) override {
    for (const auto& x : book) {
      if (x.job_id == e.job_id) return false;
    }
    book.push_back(e);
    details.push_back(detail);
    return true;
  }
  std::map<std::string, std::int64_t> balances() override {
    std::map<std::string, std::int64_t> b = opening;
    for (const auto& e : book) {
      b[e.payee] += e.amount_micro;
      b[e.payer] -= e.amount_micro;
    }
    return b;
  }
  std::vector<ledger_entry> entries(const std::optional<std::string>&, std::int64_t) override { return book; }

  std::map<std::pair<std::int64_t, std::string>, double> prices;
  std::vector<ledger_entry> book;
  std::vector<std::string> details;
  std::map<std::string, std::int64_t> opening;  // balances before the test (debt)
};

const char* k_owners = "cluster one uni\ncluster two lab\nhome alice one\nlimit uni 5\n";

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

json contract_message(double deadline_in_s, double max_price, double value, bool best_effort = false) {
  json m = job_message();
  m["contract"] = {{"deadline", unix_now() + deadline_in_s},
                   {"max_price", max_price},
                   {"value", value},
                   {"best_effort", best_effort}};
  return m;
}

// Answers every estimate sent so far to `cluster` with a bid.
void bid(fixture& f, const std::string& cluster, double completion, double price) {
  for (const auto& [c, m] : f.links.of_type("estimate")) {
    if (c == cluster) {
      f.say(c, "estimate_reply", {{"qid", m["qid"]}, {"start_in_s", 0}, {"completion_in_s", completion}, {"price", price}});
    }
  }
}

}  // namespace

TEST_CASE("contract: the clusters bid, the award is the cheapest bid that meets the deadline, its price is agreed") {
  memory_ledger ledger;
  fixture f({"one", "two"}, "contract", &ledger, owners_table::parse(k_owners, "owners"));
  std::string why;
  const auto id = f.router.submit("alice", "auto", contract_message(300, 2, 50), &why);
  REQUIRE_MESSAGE(id != 0, why);
  // The stored job keeps its contract; the estimates ask for bids.
  CHECK(json::parse(f.records.jobs.at(id).submit).contains("contract"));
  f.run_until([&] { return f.links.of_type("estimate").size() == 2; });
  bid(f, "one", 100, 1.5);  // meets 300 s, cheaper
  bid(f, "two", 50, 1.9);   // meets it too, dearer
  const auto [cluster, fwd] = f.forward_of(id);
  CHECK(cluster == "one");
  CHECK_FALSE(fwd["submit"].contains("contract"));  // the contract is the server's, never forwarded
  CHECK(ledger.agreed_price(id, "one") == 1.5);
}

TEST_CASE("contract: a job no cluster can finish by its deadline fails with the reason; best effort runs anyway") {
  memory_ledger ledger;
  fixture f({"one", "two"}, "contract", &ledger);
  std::string why;
  const auto late = f.router.submit("alice", "auto", contract_message(30, 5, 50), &why);
  REQUIRE(late != 0);
  f.run_until([&] { return f.links.of_type("estimate").size() == 2; });
  bid(f, "one", 100, 1);
  bid(f, "two", 200, 1);
  f.run_until([&] { return f.records.jobs.at(late).state == "FAILED"; });
  CHECK(f.records.events.back().second ==
        "refused: contract: no cluster can finish it by its deadline (in 30 s); the earliest within the price is one, "
        "done in about 100 s");
  CHECK(f.links.of_type("forward").empty());
  const auto anyway = f.router.submit("alice", "auto", contract_message(30, 5, 50, true), &why);
  REQUIRE(anyway != 0);
  f.run_until([&] { return f.links.of_type("estimate").size() == 4; });
  bid(f, "one", 100, 1);
  bid(f, "two", 200, 1);
  CHECK(f.forward_of(anyway).first == "one");
}

TEST_CASE("contract: bad contracts are refused at submission with one line, and nothing is queued") {
  fixture f({"one"}, "contract");
  std::string why;
  CHECK(f.router.submit("alice", "auto", contract_message(-5, 1, 1), &why) == 0);
  CHECK(why.starts_with("the contract's deadline is in the past ("));
  CHECK(f.router.submit("alice", "auto", contract_message(60, -1, 1), &why) == 0);
  CHECK(why == "the contract's max_price must be >= 0, not -1");
  CHECK(f.router.submit("alice", "auto", contract_message(60, 1, -2), &why) == 0);
  CHECK(why == "the contract's value must be >= 0, not -2");
  CHECK(f.records.jobs.empty());
}

TEST_CASE("a finished job is charged once: processor-seconds reported x agreed price, home owner to runner's owner") {
  memory_ledger ledger;
  fixture f({"one", "two"}, "fastest-queue", &ledger, owners_table::parse(k_owners, "owners"));
  f.links.price = {{"one", 1.0}, {"two", 0.25}};
  f.links.up["one"] = false;  // so that it goes to two (lab): alice's home is one (uni)
  const auto id = f.submit();
  const auto on = f.place(id, 5).first;
  REQUIRE(on == "two");
  CHECK(ledger.agreed_price(id, "two") == 0.25);
  job_update u;
  u.fid = id;
  u.job_id = 5;
  u.state = "RUNNING";
  u.nprocs = 2;
  u.start_time = "2026-11-28T10:00:00Z";
  f.say("two", "job_update", to_json(u));
  u.state = "COMPLETED";
  u.end_time = "2026-11-28T10:01:40Z";
  u.proc_seconds = 150;  // it shrank part of the time: less than 2 x 100 s
  u.exit_code = 0;
  f.say("two", "job_update", to_json(u));
  f.run_until([&] { return ledger.book.size() == 1; });
  const auto& e = ledger.book.front();
  CHECK(e.job_id == id);
  CHECK(e.payer == "uni");
  CHECK(e.payee == "lab");
  CHECK(e.proc_seconds == 150);
  CHECK(e.amount_micro == 37'500'000);
  CHECK(ledger.details.front() == "150.000 processor-seconds at 0.25: 37.5 credits from uni to lab");
  // Said again: charged once.
  f.say("two", "job_update", to_json(u));
  CHECK(ledger.book.size() == 1);
  const auto b = ledger.balances();
  CHECK(b.at("uni") + b.at("lab") == 0);
}

TEST_CASE("without processor-seconds from the cluster, a job is charged for its run time x processors") {
  memory_ledger ledger;
  fixture f({"two"}, "fastest-queue", &ledger, owners_table::parse(k_owners, "owners"));
  f.links.price = {{"two", 2.0}};
  const auto id = f.submit();
  f.place(id, 3);
  job_update u;
  u.fid = id;
  u.job_id = 3;
  u.state = "COMPLETED";
  u.nprocs = 2;
  u.start_time = "2026-11-28T10:00:00Z";
  u.end_time = "2026-11-28T10:00:10.5Z";
  f.say("two", "job_update", to_json(u));
  f.run_until([&] { return ledger.book.size() == 1; });
  CHECK(ledger.book.front().proc_seconds == doctest::Approx(21.0));
  CHECK(ledger.book.front().amount_micro == 42'000'000);
}

TEST_CASE("an owner in debt beyond its limit is refused by other owners' clusters, at submission and at placement") {
  memory_ledger ledger;
  ledger.opening = {{"uni", -6'000'000}, {"lab", 6'000'000}};  // uni is 6 in debt, its limit is 5
  fixture f({"one", "two"}, "fastest-queue", &ledger, owners_table::parse(k_owners, "owners"));
  std::string why;
  // To lab's cluster by name: refused at once, one line.
  CHECK(f.router.submit("alice", "two", job_message(), &why) == 0);
  CHECK(why == "cluster two refuses work from owner 'uni': 6 credits in debt, beyond its limit of 5");
  CHECK(f.records.jobs.empty());
  // auto: its own owner's cluster (one) still takes it.
  const auto id = f.submit();
  CHECK(f.forward_of(id).first == "one");
  // With one gone, nothing is left that would take it: refused at submission.
  f.links.up.erase("one");
  CHECK(f.router.submit("alice", "auto", job_message(), &why) == 0);
  CHECK(why == "cluster two refuses work from owner 'uni': 6 credits in debt, beyond its limit of 5");
}

TEST_CASE("a cluster cannot charge for a job it was never given: its job_update with processor-seconds changes nothing") {
  memory_ledger ledger;
  fixture f({"one", "two"}, "fastest-queue", &ledger, owners_table::parse(k_owners, "owners"));
  f.links.price = {{"one", 1.0}, {"two", 1.0}};
  f.links.up["two"] = false;  // placed on one (uni's, alice's home)
  const auto id = f.submit();
  f.place(id, 5);
  f.links.up["two"] = true;
  job_update u;
  u.fid = id;
  u.job_id = 5;
  u.state = "COMPLETED";
  u.nprocs = 8;
  u.start_time = "2026-11-28T10:00:00Z";
  u.end_time = "2026-11-28T11:00:00Z";
  u.proc_seconds = 1e9;
  f.say("two", "job_update", to_json(u));  // lab's cluster claims it ran it
  CHECK(ledger.book.empty());
  CHECK(f.records.jobs.at(id).state != "COMPLETED");
  // Its own placement ending on uni's cluster moves nothing either (same owner).
  u.proc_seconds = 10;
  f.say("one", "job_update", to_json(u));
  f.run_until([&] { return f.records.jobs.at(id).state == "COMPLETED"; });
  CHECK(ledger.book.empty());
  CHECK(f.records.events.back().second == "not charged: it ran on a cluster of its home's owner 'uni'");
}

// ---- staged files (fsub -M --stage-in) --------------------------------

namespace {

// faucets_store's stage book, in memory.
class memory_stage final : public stage_book {
public:
  void stage_inputs(std::int64_t id, const std::vector<aqs::protocol::staged_file>& files) override {
    results[id] = stage_result{};
    in[id] = files;
  }
  std::vector<aqs::protocol::staged_file> staged(std::int64_t id, const std::string& direction) override {
    auto& m = direction == "in" ? in : out;
    return m.contains(id) ? m.at(id) : std::vector<aqs::protocol::staged_file>{};
  }
  std::optional<stage_result> stage_result_of(std::int64_t id) override {
    return results.contains(id) ? std::optional<stage_result>(results.at(id)) : std::nullopt;
  }
  void outputs_back(std::int64_t id, const std::vector<aqs::protocol::staged_file>& files) override {
    in.erase(id);
    out[id] = files;
    results[id].outputs = "back";
  }
  void outputs_failed(std::int64_t id, const std::string& why) override {
    in.erase(id);
    results[id].outputs = "failed";
    results[id].detail = why;
  }
  std::vector<std::int64_t> outputs_waiting() override {
    std::vector<std::int64_t> ids;
    for (const auto& [id, r] : results) {
      if (r.outputs == "waiting" && records != nullptr && is_final_state(records->jobs.at(id).state)) ids.push_back(id);
    }
    return ids;
  }
  memory_records* records = nullptr;
  std::map<std::int64_t, std::vector<aqs::protocol::staged_file>> in, out;
  std::map<std::int64_t, stage_result> results;
};

json with_files(json files) {
  json m = job_message();
  m["stage_in"] = std::move(files);
  return m;
}

json file_json(const std::string& path, const std::string& data) {
  return aqs::protocol::to_json(std::vector<aqs::protocol::staged_file>{{path, 0644, data}});
}

}  // namespace

TEST_CASE("staged files: kept at submission, sent with the forward, fetched at the end from the job's own cluster only") {
  memory_stage stage;
  fixture f({"one", "two"});
  f.router.set_stage(&stage, 1000);
  std::string why;
  const auto id = f.router.submit("alice", "auto", with_files(file_json("in/data.txt", "hello")), &why);
  REQUIRE_MESSAGE(id != 0, why);
  CHECK(stage.in.at(id).size() == 1);
  CHECK(json::parse(f.records.jobs.at(id).submit).value("staged_files", 0) == 1);
  const auto [on, fwd] = f.forward_of(id);
  REQUIRE(fwd.contains("files"));
  CHECK(fwd["files"][0]["path"] == "in/data.txt");
  CHECK_FALSE(fwd["submit"].contains("staged_files"));
  f.say(on, "forwarded", {{"fid", id}, {"job_id", 5}});
  f.run_until([&] { return f.records.jobs.at(id).local_id == 5; });
  const std::string other = on == "one" ? "two" : "one";
  const json good = {{"fid", id}, {"job_id", 5}, {"files", file_json("result.txt", "42")}};
  // Before the end, nobody was asked: outputs are not taken, even from its cluster.
  f.say(on, "outputs", good);
  CHECK(stage.results.at(id).outputs == "waiting");
  job_update u;
  u.fid = id;
  u.job_id = 5;
  u.state = "COMPLETED";
  u.nprocs = 2;
  f.say(on, "job_update", to_json(u));
  REQUIRE(f.links.of_type("fetch").size() == 1);
  CHECK(f.links.of_type("fetch")[0].first == on);
  CHECK(f.links.of_type("fetch")[0].second["local_user"] == "alice");
  // Another cluster (it proved a key of its own) cannot put files into this job.
  f.say(other, "outputs", {{"fid", id}, {"job_id", 5}, {"files", file_json("result.txt", "forged")}});
  CHECK(stage.results.at(id).outputs == "waiting");
  CHECK_FALSE(stage.out.contains(id));
  // Outputs with a path out of the job's directory are refused whole.
  f.say(on, "outputs", {{"fid", id}, {"job_id", 5}, {"files", file_json("../evil", "x")}});
  CHECK(stage.results.at(id).outputs == "failed");
  CHECK(stage.results.at(id).detail.find("'..'") != std::string::npos);
  CHECK_FALSE(stage.out.contains(id));
}

TEST_CASE("staged files: its own cluster's outputs are kept as sent") {
  memory_stage stage;
  fixture f;
  f.router.set_stage(&stage, 1000);
  std::string why;
  const auto id = f.router.submit("alice", "auto", with_files(file_json("a", "1")), &why);
  REQUIRE(id != 0);
  f.place(id, 5);
  job_update u;
  u.fid = id;
  u.job_id = 5;
  u.state = "FAILED";
  u.nprocs = 2;
  f.say("one", "job_update", to_json(u));
  f.say("one", "outputs", {{"fid", id}, {"job_id", 5}, {"files", file_json("sub/b.bin", std::string("\0\xff", 2))}});
  REQUIRE(stage.results.at(id).outputs == "back");
  CHECK(stage.out.at(id).at(0).path == "sub/b.bin");
  CHECK(stage.out.at(id).at(0).data == std::string("\0\xff", 2));
  CHECK_FALSE(stage.in.contains(id));
}

TEST_CASE("staged files: '..', absolute, oversized or without a stage book are refused at submission, nothing queued") {
  memory_stage stage;
  fixture f;
  std::string why;
  CHECK(f.router.submit("alice", "auto", with_files(file_json("a", "1")), &why) == 0);
  CHECK(why == "this Faucets server takes no staged files");
  f.router.set_stage(&stage, 10);
  CHECK(f.router.submit("alice", "auto", with_files(file_json("x/../../etc/passwd", "1")), &why) == 0);
  CHECK(why == "staged path 'x/../../etc/passwd' contains '..': staged paths stay inside the job's directory");
  CHECK(f.router.submit("alice", "auto", with_files(file_json("/etc/passwd", "1")), &why) == 0);
  CHECK(why.find("is absolute") != std::string::npos);
  CHECK(f.router.submit("alice", "auto", with_files(file_json("big", std::string(11, 'x'))), &why) == 0);
  CHECK(why == "staged files are over the limit of 10 bytes");
  CHECK(f.records.jobs.empty());
  CHECK(stage.in.empty());
}

TEST_CASE("staged files: outputs whose answer was lost with the link are asked for again when the cluster is back") {
  memory_stage stage;
  fixture f;
  stage.records = &f.records;
  f.router.set_stage(&stage, 1000);
  std::string why;
  const auto id = f.router.submit("alice", "auto", with_files(file_json("a", "1")), &why);
  REQUIRE(id != 0);
  f.place(id, 5);
  job_update u;
  u.fid = id;
  u.job_id = 5;
  u.state = "COMPLETED";
  u.nprocs = 2;
  f.say("one", "job_update", to_json(u));
  REQUIRE(f.links.of_type("fetch").size() == 1);
  f.router.cluster_down("one");  // the answer is lost
  f.router.cluster_up("one");
  REQUIRE(f.links.of_type("fetch").size() == 2);
  f.say("one", "outputs", {{"fid", id}, {"job_id", 5}, {"files", file_json("r", "2")}});
  CHECK(stage.results.at(id).outputs == "back");
  f.router.cluster_up("one");  // nothing left to ask
  CHECK(f.links.of_type("fetch").size() == 2);
}
