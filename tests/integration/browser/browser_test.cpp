// The dashboard in a real browser: tests/browser/dashboard.mjs drives
// headless Chromium (Debian's chromium, through playwright-core) against a
// real aqsd --http with real agents: it opens the page signed in by a
// one-time code from ftoken --login, submits an adaptive jacobi2d from the
// page's form, sees it on the grid, submits a rigid job with fsub, sees the
// adaptive job shrink on the page (table and tiles agreeing), reads the
// resize (8 to 4) on the job's page and its live residual and rank charts
// (jacobi2d publishes both), ends the rigid job and sees the job grow back
// (rank chart 8, 4, 8), and cancels it from the page. This side starts the system, checks what the
// page did really happened, and prints the latency the script measured.
#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "browser_tools.hpp"
#include "e2e.hpp"

namespace {

std::string missing_tools() { return aqs::test::missing_browser_tools(AQS_NODEJS, AQS_BROWSER_DIR); }

// The value after `key` on the line starting with `key` in `out`.
std::string line_after(const std::string& out, const std::string& key) {
  const auto at = out.find("\n" + key);
  const auto start = at == std::string::npos ? (out.starts_with(key) ? 0 : std::string::npos) : at + 1;
  if (start == std::string::npos) return "";
  const auto end = out.find('\n', start);
  return out.substr(start + key.size(), end == std::string::npos ? std::string::npos : end - start - key.size());
}

}  // namespace

TEST_CASE("in Chromium, the dashboard submits an adaptive job, shows it shrink for a rigid job from fsub and grow back, "
          "charts its published residual and rank count live, and cancels it") {
  if (const std::string why = missing_tools(); !why.empty()) {
    // scripts/test installs all of it and sets AQS_REQUIRE_BROWSER: there a
    // missing browser is a failure, not a skip.
    if (std::getenv("AQS_REQUIRE_BROWSER") != nullptr) FAIL("the browser test cannot run, missing:" << why);
    MESSAGE("skipped, missing:" << why);
    return;
  }
  test::test_database db;
  auto o = test::nodes_of(db, 2, 4);
  o.aqsd_args = {"--http", "127.0.0.1:0"};
  test::cluster c(o);
  const std::string url = "http://127.0.0.1:" + std::to_string(c.http_port()) + "/";

  // Root's token, as the first line of a user's session would get it.
  const auto t = c.cmd(AQS_FTOKEN_BINARY, {"--lifespan", "3600"});
  REQUIRE_MESSAGE(t.status == 0, t.err);
  const std::string token = test::last_line(t.out);
  // The page is opened signed in by a one-time login code (ftoken --login):
  // no token in its address.
  const auto l = c.cmd(AQS_FTOKEN_BINARY, {"--login", "--url", url});
  REQUIRE_MESSAGE(l.status == 0, l.err);
  const std::string login_url = test::last_line(l.out);
  REQUIRE(login_url.starts_with(url + "#login="));

  // The adaptive job: jacobi2d under mpirun on whatever it is given, paced
  // so that it runs (and reaches MPI_Migrate every 10 ms) until cancelled,
  // at least 200 s; it reports progress every 2,000 iterations. A job
  // from the REST API has only the environment it is given: none here.
  const fs::path progress = c.workdir() / "jacobi.out";
  const std::string script = std::string("#!/bin/bash\n") +
                             "export PATH=/usr/local/bin:/usr/bin:/bin\n"
                             "export OMPI_MCA_btl_vader_single_copy_mechanism=none\n"
                             // Each resize stays RESIZING a second after the job claimed its map
                             // (the shim's testing aid), so that the page shows the job mid-resize
                             // and the table/tile agreement is checked there, not only around it.
                             "export AQS_TEST_PAUSE_AFTER_CLAIM_MS=1000\n"
                             "exec " MPIEXEC " --oversubscribe --bind-to none -np $AQS_NPROCS " JACOBI2D_BINARY
                             " --rows 64 --cols 48 --iters 20000 --pace-ms 10 --out " +
                             (c.workdir() / "jacobi.grid").string() + " >" + progress.string() + " 2>&1\n";
  fs::create_directories(AQS_ARTIFACT_DIR);
  // A test run leaves the tree as it found it: the screenshots go to the
  // build tree unless AQS_UPDATE_SCREENSHOTS=1 asks to refresh docs/img/.
  const char* update = std::getenv("AQS_UPDATE_SCREENSHOTS");
  const std::string shots = update != nullptr && std::string(update) == "1"
                                ? std::string(AQS_SCREENSHOT_DIR)
                                : (fs::path(AQS_ARTIFACT_DIR) / "screenshots").string();
  fs::create_directories(shots);
  const auto r = test::run({AQS_NODEJS, (fs::path(AQS_BROWSER_DIR) / "dashboard.mjs").string()},
                           {{"AQS_URL", url},
                            {"AQS_TOKEN", token},
                            {"AQS_LOGIN_URL", login_url},
                            {"AQS_FKILL", test::bin().fkill},
                            {"AQS_SOCKET", c.socket()},
                            {"AQS_FSUB", test::bin().fsub},
                            {"AQS_WORKDIR", c.workdir().string()},
                            {"AQS_SCRIPT", script},
                            {"AQS_PROGRESS", progress.string()},
                            {"AQS_PROCS", "8"},
                            {"AQS_SHOTS", shots},
                            {"AQS_ARTIFACTS", AQS_ARTIFACT_DIR}},
                           std::nullopt, std::nullopt, AQS_BROWSER_DIR, 600s);
  const std::string measured = line_after(r.out, "measured ");
  MESSAGE("browser: " << (measured.empty() ? "nothing measured" : measured));
  MESSAGE("table and tiles: shrink " << line_after(r.out, "agreement shrink ") << ", grow "
                                     << line_after(r.out, "agreement grow "));
  INFO("dashboard.mjs said:\n" << r.out << r.err << "\njacobi2d said:\n" << test::slurp(progress));
  REQUIRE(r.status == 0);

  // What the page did, as aqsd has it: the adaptive job cancelled after
  // being shrunk to half the cluster and grown back when the rigid one,
  // which ran on the rest, was cancelled.
  const auto jobs = nlohmann::json::parse(line_after(r.out, "jobs "));
  const std::int64_t adaptive = jobs.at("adaptive"), rigid = jobs.at("rigid");
  const auto a = c.wait_state(adaptive, {job_state::cancelled});
  CHECK(a.adaptive);
  CHECK(a.name == "web-adaptive");
  c.wait_state(rigid, {job_state::cancelled});
  const auto nums = nlohmann::json::parse(measured);
  CHECK(nums.at("from") == 8);
  CHECK(nums.at("to") == 4);
  // Usage per account on the utilisation page: the cancelled rigid job,
  // charged to root (dashboard.mjs checked the row against /api/v1/usage).
  const auto usage = nlohmann::json::parse(line_after(r.out, "usage "));
  CHECK(usage.at("jobs").get<int>() >= 1);
  CHECK(usage.at("cpu").get<double>() > 0);
}
