// dashboard.mjs: the dashboard of aqsd --http in headless Chromium (Debian's
// /usr/bin/chromium through playwright-core), driven by integration_browser
// (tests/integration/browser), which starts PostgreSQL, aqsd and the agents
// and passes what it started in the environment:
//   AQS_URL          the dashboard (http://127.0.0.1:PORT/)
//   AQS_TOKEN        a token from ftoken
//   AQS_LOGIN_URL    the dashboard's address with a one-time login code
//                    (ftoken --login --url): the page is opened signed in
//   AQS_FKILL        the fkill binary (ends the rigid job: the adaptive one grows)
//   AQS_SOCKET       aqsd's Unix socket (for fsub)
//   AQS_FSUB         the fsub binary
//   AQS_WORKDIR      a directory for the jobs
//   AQS_SCRIPT       the adaptive job's script (runs until cancelled)
//   AQS_PROGRESS     a file the adaptive job writes its progress to
//   AQS_PROCS        processors in the cluster (the adaptive job's maximum)
//   AQS_SHOTS        where screenshots go (docs/img; not writable: skipped)
//   AQS_ARTIFACTS    where a screenshot of a failure goes
//   CHROMIUM         the browser (default /usr/bin/chromium)
// It opens the page signed in by a one-time login code (no token in the
// address), submits an adaptive job from the form, sees it on the processor
// grid, submits a rigid job with fsub, sees the adaptive job shrink on the
// page (the job table's sizes agreeing with the tiles all along), opens the
// job's page (the resize from 8 to 4 in its table; its published residual
// chart updating while it runs, its rank count 4), ends the rigid job and
// sees the adaptive one grow back on the grid and its rank chart step
// 8, 4, 8, opens the utilisation page (the rigid job charged to its account
// there, as /api/v1/usage has it), and cancels the adaptive job from
// the page. Every wait is on a condition
// with a generous deadline: the machine may be busy with other tests. The
// latency from aqsd's new map (its event's time) to the page showing it is
// printed as a "measured" JSON line, not asserted (speed belongs in bench/).
import { chromium } from "playwright-core";
import { env, log, long, sleep, until } from "./waits.mjs";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const url = env("AQS_URL");
const token = env("AQS_TOKEN");
const procs = Number(env("AQS_PROCS", "8"));
const shots = env("AQS_SHOTS", "");
const artifacts = env("AQS_ARTIFACTS", "");

// Every job event aqsd streams, as the page sees them (its own connection).
class events {
  constructor() {
    this.seen = [];
    this.abort = new AbortController();
  }
  async start() {
    const r = await fetch(new URL("/api/v1/events", url), {
      headers: { Authorization: "Bearer " + token }, signal: this.abort.signal });
    if (!r.ok) throw new Error(`/api/v1/events: ${r.status}`);
    const reader = r.body.getReader();
    const dec = new TextDecoder();
    let buf = "";
    (async () => {
      try {
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let at;
          while ((at = buf.indexOf("\n\n")) >= 0) {
            const ev = buf.slice(0, at);
            buf = buf.slice(at + 2);
            const data = ev.split("\n").find((l) => l.startsWith("data: "));
            if (ev.startsWith("event: job") && data) this.seen.push({ at: Date.now(), ...JSON.parse(data.slice(6)) });
          }
        }
      } catch (e) {
        if (e.name !== "AbortError") log("event stream ended:", e.message);
      }
    })();
  }
  find(pred) { return this.seen.find(pred); }
  stop() { this.abort.abort(); }
}

async function shoot(page, name) {
  if (!shots) return;
  const buf = await page.screenshot({ fullPage: true });
  try {
    fs.mkdirSync(shots, { recursive: true });
    fs.writeFileSync(path.join(shots, name), buf);
    log("screenshot", path.join(shots, name));
  } catch (e) {
    log(`screenshot ${name} not written (${e.code || e.message}): carrying on`);
  }
}

const ones = (m) => [...(m || "")].filter((c) => c === "1").length;
// How many processors the grid shows for a job: all its cells, and those not
// outlined as given up (reserved).
const gridCount = (page, job) => page.evaluate((id) => {
  const cells = [...document.querySelectorAll(`#map .proc[data-job="${id}"]`)];
  return { all: cells.length, kept: cells.filter((c) => !c.classList.contains("reserved")).length };
}, String(job));
// A poller in the page: every few milliseconds, whether the job table's
// sizes of `id` (held, and the map sent) are the tiles' (held: all but the
// incoming ones; sent: all but the given-up ones). Counts disagreements.
const watchAgreement = (page, job) => page.evaluate((id) => {
  window.aqsAgree = { looks: 0, resizing: 0, disagree: [] };
  const tick = () => {
    const row = document.querySelector(`#jobs tr[data-job="${id}"]`);
    const cells = [...document.querySelectorAll(`#map .proc[data-job="${id}"]`)];
    if (row && row.dataset.held !== undefined && cells.length) {
      const held = cells.filter((c) => !c.classList.contains("incoming")).length;
      const sent = cells.filter((c) => !c.classList.contains("reserved")).length;
      ++window.aqsAgree.looks;
      if (row.dataset.held !== row.dataset.target) ++window.aqsAgree.resizing;
      if (Number(row.dataset.held) !== held || Number(row.dataset.target) !== sent) {
        if (window.aqsAgree.disagree.length < 10) {
          window.aqsAgree.disagree.push(`table ${row.dataset.held}->${row.dataset.target}, tiles ${held}->${sent}`);
        }
      }
    }
    if (!window.aqsAgree.stop) setTimeout(tick, 5);
  };
  tick();
}, String(job));
const agreement = async (page) => page.evaluate(() => { window.aqsAgree.stop = true; return window.aqsAgree; });
// The published values' chart of `name` on the job's page.
const chartOf = (page, name) => page.evaluate((n) => {
  const c = document.querySelector(`#values-charts svg[data-series="${n}"]`);
  return c ? { points: Number(c.dataset.points), last: c.dataset.last, steps: c.dataset.steps || "" } : null;
}, name);

async function main() {
  const stream = new events();
  await stream.start();
  const args = ["--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"];
  if (process.getuid && process.getuid() === 0) args.push("--no-sandbox");  // Chromium's sandbox refuses root
  const browser = await chromium.launch({ executablePath: env("CHROMIUM", "/usr/bin/chromium"), headless: true, args,
                                          timeout: long });
  const page = await browser.newPage({ viewport: { width: 1100, height: 800 } });
  page.setDefaultTimeout(long);
  page.on("pageerror", (e) => log("page error:", e.message));
  page.on("dialog", (d) => { log("dialog:", d.message()); d.dismiss(); });
  try {
    // ---- signed in by a one-time login code (ftoken --login), or the token
    const loginUrl = process.env.AQS_LOGIN_URL;
    if (loginUrl) {
      await page.goto(loginUrl);
      await page.waitForFunction(() => /^as /.test(document.getElementById("who").textContent));
      if (page.url().includes("login=")) throw new Error(`the login code stayed in the address: ${page.url()}`);
      log("signed in by a login code", await page.textContent("#who"));
    } else {
      await page.goto(url);
      await page.fill("#token", token);
      await page.click("#use");
      await page.waitForFunction(() => /^as /.test(document.getElementById("who").textContent));
      log("logged in", await page.textContent("#who"));
    }

    // ---- submit an adaptive job from the form
    await page.fill('#submit input[name="name"]', "web-adaptive");
    await page.fill('#submit input[name="min_pe"]', "2");
    await page.fill('#submit input[name="max_pe"]', String(procs));
    await page.check('#submit input[name="adaptive"]');
    await page.fill('#submit input[name="time"]', "30");
    await page.fill('#submit input[name="workdir"]', env("AQS_WORKDIR"));
    await page.fill('#submit textarea[name="script"]', env("AQS_SCRIPT"));
    await page.click("#submit button");
    const adaptive = Number(await (await page.waitForSelector("#submitted[data-job]")).getAttribute("data-job"));
    log("adaptive job", adaptive, "submitted from the page");

    // ---- see it on the processor grid, on every processor (it is alone)
    await until(`job ${adaptive} on ${procs} processors of the grid`,
                async () => (await gridCount(page, adaptive)).all === procs);
    // Its shim must be in MPI_Migrate's reach before it can apply a new map.
    const progress = env("AQS_PROGRESS");
    await until(`job ${adaptive}'s first iterations in ${progress}`,
                () => fs.existsSync(progress) && fs.readFileSync(progress, "utf8").includes("iter "), long, 200);
    await shoot(page, "dashboard-cluster.png");

    // ---- a rigid job from the command line; the adaptive one shrinks
    // A poller in the page notes when the grid first shows the shrink (the
    // given-up processors outlined, or gone) and when it shows it applied.
    await page.evaluate(({ id, keep }) => {
      window.aqsMarks = {};
      const tick = () => {
        const cells = [...document.querySelectorAll(`#map .proc[data-job="${id}"]`)];
        const kept = cells.filter((c) => !c.classList.contains("reserved")).length;
        if (!window.aqsMarks.shown && cells.length > 0 && kept <= keep) window.aqsMarks.shown = Date.now();
        if (!window.aqsMarks.applied && cells.length > 0 && cells.length <= keep) window.aqsMarks.applied = Date.now();
        if (!window.aqsMarks.applied) setTimeout(tick, 5);
      };
      tick();
    }, { id: String(adaptive), keep: procs / 2 });
    await watchAgreement(page, adaptive);
    const fsub = execFileSync(env("AQS_FSUB"), ["-n", String(procs / 2), "-J", "cli-rigid", "-t", "30", "--wrap", "sleep 600"],
                              { cwd: env("AQS_WORKDIR"), env: { ...process.env }, encoding: "utf8" });
    const rigid = Number(fsub.trim().split(/\s+/).pop());
    if (!rigid) throw new Error(`fsub printed no job id: ${fsub}`);
    log("rigid job", rigid, "submitted with fsub");
    const sent = await until(`aqsd's new map for job ${adaptive}`,
                             () => stream.find((e) => e.job_id === adaptive && e.state === "RESIZING"));
    const acked = await until(`job ${adaptive} applying its new map`,
                              () => stream.find((e) => e.job_id === adaptive && e.state === "RUNNING" && e.at >= sent.at));
    const marks = await until("the page showing the shrink applied",
                              () => page.evaluate(() => (window.aqsMarks.applied ? window.aqsMarks : null)));
    await until(`job ${rigid} on the grid`, async () => (await gridCount(page, rigid)).all === procs / 2);
    const after = await gridCount(page, adaptive);
    if (after.all !== procs - procs / 2) throw new Error(`job ${adaptive} shows ${after.all} processors after the shrink`);
    const shrinkAgreement = await agreement(page);
    log("table and tiles during the shrink:", JSON.stringify(shrinkAgreement));
    console.log("agreement shrink " + JSON.stringify(shrinkAgreement));
    if (shrinkAgreement.disagree.length) {
      throw new Error(`the job table and the tiles disagreed during the shrink: ${shrinkAgreement.disagree.join("; ")}`);
    }
    // The page was looked at mid-resize (the job holds its claimed map a
    // second: AQS_TEST_PAUSE_AFTER_CLAIM_MS), not only before and after.
    if (shrinkAgreement.resizing === 0) throw new Error("the page never showed the job mid-shrink");
    const measured = {
      map_sent_to_page_ms: Math.round(marks.shown - sent.time * 1000),
      map_sent_to_stream_ms: Math.round(sent.at - sent.time * 1000),
      map_applied_to_page_ms: Math.round(marks.applied - acked.time * 1000),
      resize_ms: Math.round((acked.time - sent.time) * 1000),
      from: ones(sent.procs), to: ones(sent.target),
    };
    console.log("measured " + JSON.stringify(measured));
    await shoot(page, "dashboard-shrunk.png");

    // ---- the job's page: processors over time, the resize with its phases
    await page.click(`#jobs tr[data-job="${adaptive}"] a`);
    await page.waitForSelector("#view-job:not([hidden])");
    await until("the resize on the job's page", () => page.evaluate(() =>
      [...document.querySelectorAll("#resizes tr.resize")].some((r) => r.lastChild.textContent === "applied")));
    await page.waitForSelector('#job-chart path[data-series="held"]');
    // Each resize as it was: from 8 to 4 (not "to 0": a claim of the map is
    // no new resize), and the claim's event shows the map's processors.
    const table = await page.evaluate(() => ({
      resizes: [...document.querySelectorAll("#resizes tr.resize")].map((r) => [...r.children].map((c) => c.textContent)),
      events: [...document.querySelectorAll("#events tbody tr")].map((r) => [...r.children].map((c) => c.textContent)),
    }));
    log("resizes on the job's page:", JSON.stringify(table.resizes));
    const applied = table.resizes.filter((r) => r[9] === "applied");
    if (applied.length !== 1 || applied[0][1] !== String(procs) || applied[0][2] !== String(procs / 2)) {
      throw new Error(`the job's resize table does not show its resize from ${procs} to ${procs / 2}: ${JSON.stringify(table.resizes)}`);
    }
    if (table.resizes.some((r) => r[2] === "0")) throw new Error(`a resize "to 0": ${JSON.stringify(table.resizes)}`);
    const claims = table.events.filter((e) => /claimed/.test(e[3]));
    if (claims.some((e) => e[2] === "0")) throw new Error(`a claim shows 0 processors: ${JSON.stringify(claims)}`);

    // ---- its published values: the residual chart moving while it runs,
    // and its rank count (4 now)
    const first = await until("the residual chart", async () => {
      const c = await chartOf(page, "residual");
      return c && c.points >= 2 ? c : null;
    });
    const later = await until("the residual chart updating", async () => {
      const c = await chartOf(page, "residual");
      return c && c.points > first.points ? c : null;
    });
    log("residual chart:", first.points, "points, then", later.points, "; last", later.last);
    await until(`the rank chart at ${procs / 2}`, async () => (await chartOf(page, "ranks"))?.last === String(procs / 2));
    await shoot(page, "dashboard-job.png");

    // ---- the rigid job ends: the adaptive one grows back, the table
    // agreeing with the tiles all the while
    await page.click("#nav-cluster");
    await until(`job ${adaptive} in the job table`, () => page.$(`#jobs tr[data-job="${adaptive}"]`));
    await watchAgreement(page, adaptive);
    execFileSync(env("AQS_FKILL"), [String(rigid)], { env: { ...process.env }, encoding: "utf8" });
    const grown = await until(`job ${adaptive} growing again`,
                              () => stream.find((e) => e.job_id === adaptive && e.state === "RESIZING" && e.at > acked.at));
    await until(`job ${adaptive} applying its grow`,
                () => stream.find((e) => e.job_id === adaptive && e.state === "RUNNING" && e.at >= grown.at));
    await until(`job ${adaptive} on all ${procs} processors again`, async () => {
      const g = await gridCount(page, adaptive);
      return g.all === procs && g.kept === procs;
    });
    const growAgreement = await agreement(page);
    log("table and tiles during the grow:", JSON.stringify(growAgreement));
    console.log("agreement grow " + JSON.stringify(growAgreement));
    if (growAgreement.disagree.length) {
      throw new Error(`the job table and the tiles disagreed during the grow: ${growAgreement.disagree.join("; ")}`);
    }
    if (growAgreement.resizing === 0) throw new Error("the page never showed the job mid-grow");
    await page.click(`#jobs tr[data-job="${adaptive}"] a`);
    await page.waitForSelector("#view-job:not([hidden])");
    const steps = await until(`the rank chart stepping ${procs}, ${procs / 2}, ${procs}`, async () => {
      const c = await chartOf(page, "ranks");
      return c && c.steps.endsWith(`${procs},${procs / 2},${procs}`) ? c : null;
    });
    log("rank chart steps:", steps.steps);
    // Live: without reloading, the residual chart goes on.
    const now = await chartOf(page, "residual");
    await until("the residual chart still updating", async () => (await chartOf(page, "residual")).points > now.points);
    await shoot(page, "dashboard-values.png");

    // ---- utilisation over time
    await page.click("#nav-utilization");
    await until("utilisation samples on the chart", () => page.evaluate(() =>
      document.querySelector('#util-chart path[data-series="alloc"]') !== null));
    // Usage per account (issue 32): the cancelled rigid job is charged to
    // root's account; the page's rows are what /api/v1/usage says for the
    // same window, account totals the sum of their users.
    const usageRow = await until("the rigid job's usage in the account table", () => page.evaluate(() => {
      const tr = document.querySelector('#usage tr[data-user="root"]');
      return tr && Number(tr.dataset.jobs) >= 1 && Number(tr.dataset.cpuSeconds) > 0
        ? { account: tr.dataset.account, jobs: Number(tr.dataset.jobs), cpu: Number(tr.dataset.cpuSeconds) } : null;
    }));
    const rest = await (await fetch(new URL("/api/v1/usage?since=" + Math.floor(Date.now() / 1000 - 3600), url),
                                    { headers: { Authorization: "Bearer " + token } })).json();
    const restRow = rest.usage.find((r) => r.user === "root" && (r.account || "(none)") === usageRow.account);
    if (!restRow || restRow.jobs !== usageRow.jobs || Math.abs(restRow.cpu_seconds - usageRow.cpu) > 1e-6) {
      throw new Error(`usage on the page ${JSON.stringify(usageRow)} is not /api/v1/usage's ${JSON.stringify(rest.usage)}`);
    }
    const totals = await page.evaluate(() => [...document.querySelectorAll("#usage tr.account")].map((tr) => {
      const users = [...document.querySelectorAll(`#usage tr[data-user][data-account="${tr.dataset.account}"]`)];
      return { account: tr.dataset.account, jobs: Number(tr.dataset.jobs),
               users: users.reduce((t, u) => t + Number(u.dataset.jobs), 0) };
    }));
    if (!totals.length || totals.some((t) => t.jobs !== t.users)) throw new Error(`account totals wrong: ${JSON.stringify(totals)}`);
    log("usage on the page:", JSON.stringify(usageRow), "accounts", JSON.stringify(totals));
    console.log("usage " + JSON.stringify(usageRow));
    await shoot(page, "dashboard-utilization.png");

    // ---- cancel the adaptive job from the page
    await page.click("#nav-cluster");
    await page.waitForSelector(`#jobs tr[data-job="${adaptive}"] button.cancel`);
    await page.click(`#jobs tr[data-job="${adaptive}"] button.cancel`);
    await until(`job ${adaptive} cancelled`, () => stream.find((e) => e.job_id === adaptive && e.state === "CANCELLED"));
    await until(`job ${adaptive} gone from the page`, async () =>
      (await gridCount(page, adaptive)).all === 0 && (await page.$(`#jobs tr[data-job="${adaptive}"]`)) === null);
    log("job", adaptive, "cancelled from the page");
    console.log("jobs " + JSON.stringify({ adaptive, rigid }));
  } catch (e) {
    if (artifacts) {
      try {
        fs.writeFileSync(path.join(artifacts, "failure.png"), await page.screenshot({ fullPage: true }));
        fs.writeFileSync(path.join(artifacts, "failure.html"), await page.content());
        log("the page at the failure:", path.join(artifacts, "failure.png"));
      } catch (ignored) { /* the report below matters more */ }
    }
    throw e;
  } finally {
    stream.stop();
    await browser.close();
  }
}

main().then(() => process.exit(0), (e) => {
  console.error("FAILED:", e.stack || e.message);
  process.exit(1);
});
