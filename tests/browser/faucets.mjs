// faucets.mjs: faucetsd's page in headless Chromium (Debian's /usr/bin/chromium
// through playwright-core), driven by integration_faucets_web
// (tests/integration/faucets_web), which starts faucetsd, two AQS clusters
// and PostgreSQL and passes in the environment:
//   AQS_URL        faucetsd's page (http://127.0.0.1:PORT/)
//   AQS_TOKEN      the user's token from ftoken --socket (typed into the page)
//   AQS_WORKDIR    the user's directory for the job
//   AQS_PUBLISH    the aqs-publish binary (the job publishes a value)
//   AQS_EXPECT     the cluster the server's policy must pick
//   AQS_ARTIFACTS  where a screenshot of a failure goes
//   CHROMIUM       the browser (default /usr/bin/chromium)
// It types the token, checks that bad form input (negative processors, a
// past deadline, an unknown cluster) is refused in one line with nothing
// submitted, asks for a quote (every cluster's start estimate), submits a
// job from the form, lands on the job's page and waits there for its
// cluster, its output, its published value's chart and its end. It prints
// "job ID CLUSTER" for the C++ side, which checks what really happened.
import { chromium } from "playwright-core";
import { env, log, long, sleep, until } from "./waits.mjs";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const url = env("AQS_URL");
const token = env("AQS_TOKEN");
const workdir = env("AQS_WORKDIR");
const publish = env("AQS_PUBLISH");
const expect = env("AQS_EXPECT");
const artifacts = env("AQS_ARTIFACTS", "");

// The user's jobs as the API has them (the page's own token).
const jobCount = async (page) => page.evaluate(async (t) => {
  const r = await fetch("/api/v1/jobs?all=1", { headers: { Authorization: "Bearer " + t } });
  return (await r.json()).jobs.length;
}, token);

async function fill(page, f) {
  for (const [sel, v] of Object.entries(f)) await page.fill(sel, String(v));
}

// Submits the form (with `cluster` forced into its list first, as a stale
// or edited form would send it, in the same turn as the click so that the
// page's refresh cannot undo it) and waits for its one-line refusal.
async function refused(page, what, cluster = null, button = "#submit-btn") {
  await page.evaluate(([c, b]) => {
    document.querySelector("#form-msg").textContent = "";
    if (c) {
      const s = document.querySelector("#f-cluster");
      s.add(new Option(c, c));
      s.value = c;
    }
    document.querySelector(b).click();
  }, [cluster, button]);
  const msg = await until(`the refusal of ${what}`, async () => (await page.textContent("#form-msg")).trim());
  if (msg.includes("\n")) throw new Error(`${what}: more than one line: ${msg}`);
  if (!page.url().endsWith("/")) throw new Error(`${what}: the page left the form for ${page.url()}`);
  log(`refused ${what}: ${msg}`);
  console.log(`refusal ${what}: ${msg}`);
  return msg;
}

async function main() {
  const args = ["--disable-dev-shm-usage", "--disable-gpu", "--no-first-run"];
  if (process.getuid && process.getuid() === 0) args.push("--no-sandbox");
  const browser = await chromium.launch({ executablePath: env("CHROMIUM", "/usr/bin/chromium"), headless: true, args,
                                          timeout: long });
  const page = await browser.newPage({ viewport: { width: 1100, height: 900 } });
  page.setDefaultTimeout(long);
  page.on("pageerror", (e) => log("page error:", e.message));
  try {
    await page.goto(url);
    // The token is typed into the page (kept in its storage), never put in an address.
    await page.fill("#token", token);
    await page.click("#go");
    await until("both clusters in the form's list", async () =>
      (await page.$$eval("#f-cluster option", (os) => os.map((o) => o.value))).length === 3);
    const before = await jobCount(page);

    const good = { "#f-name": "web-hello", "#f-workdir": workdir, "#f-procs": 1, "#f-time": 5,
                   "#f-script": `echo hello-from-the-browser\n${publish} progress 1\n${publish} progress 2\nsleep 2\necho done-in-the-browser` };
    // Bad input: one line each, nothing submitted.
    await fill(page, { ...good, "#f-procs": -2 });
    await refused(page, "negative processors");
    await fill(page, { "#f-procs": 1, "#f-deadline": "2020-01-01T00:00", "#f-price": 1, "#f-value": 1 });
    await refused(page, "a past deadline");
    await fill(page, { "#f-deadline": "", "#f-price": "", "#f-value": "" });
    // A cluster the server does not know (a stale or edited form); its quote is the same refusal.
    await refused(page, "an unknown cluster", "nowhere");
    await refused(page, "quote", "nowhere", "#quote-btn");
    await page.selectOption("#f-cluster", "auto");
    if ((await jobCount(page)) !== before) throw new Error("a refused form submitted a job");

    // The quote: when it would start on each cluster.
    await page.evaluate(() => { document.querySelector("#form-msg").textContent = ""; });
    await page.click("#quote-btn");
    const rows = await until("a start estimate from both clusters", async () => {
      const r = await page.$$eval("#quote tbody tr", (trs) => trs.map((tr) => [...tr.cells].map((c) => c.textContent)));
      return r.length === 2 && r.every((x) => x[2] !== "") ? r : null;
    });
    console.log(`quote ${JSON.stringify(rows)}`);

    // Submitted: the page goes to the job's page, which follows it on its cluster.
    await page.click("#submit-btn");
    await page.waitForURL(/\/jobs\/\d+$/);
    const id = Number(page.url().match(/\/jobs\/(\d+)$/)[1]);
    const cluster = await until("the job's cluster on its page", async () => {
      const c = (await page.textContent("#job-cluster")).trim();
      return c && !c.startsWith("(") ? c : null;
    });
    if (cluster !== expect) throw new Error(`the page says cluster ${cluster}, the policy's pick is ${expect}`);
    await until("its output on its page", async () =>
      (await page.textContent("#output")).includes("hello-from-the-browser"));
    await until("its published value's chart", async () =>
      (await page.$('#charts svg[data-series="progress"]')) !== null);
    await until("its end on its page", async () => (await page.textContent("#job-state")).trim() === "COMPLETED");
    await until("the last of its output", async () =>
      (await page.textContent("#output")).includes("done-in-the-browser"));
    const history = await page.$$eval("#history tbody tr", (trs) => trs.map((tr) => tr.cells[1].textContent));
    console.log(`history ${JSON.stringify(history)}`);
    console.log(`job ${id} ${cluster}`);

    // A job with a file sent along from the form (staged): it runs in a
    // directory of its own on its cluster and reads the file there; its page
    // shows that output, and once it ends the files it left, back at the server.
    const input = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "aqs-faucets-web-")), "staged-input.txt");
    fs.writeFileSync(input, "staged-content-4711\n");
    await page.goto(url);
    await until("the form again", async () =>
      (await page.$$eval("#f-cluster option", (os) => os.length)) === 3);
    await fill(page, { ...good, "#f-name": "web-staged",
                       "#f-script": "cat staged-input.txt\necho made > result.txt\nsleep 4\necho staged-done" });
    await page.setInputFiles("#f-files", input);
    await page.click("#submit-btn");
    await page.waitForURL(/\/jobs\/\d+$/);
    const staged = Number(page.url().match(/\/jobs\/(\d+)$/)[1]);
    if (staged === id) throw new Error("the staged job's page is the first job's");
    await until("the staged file's content in its output", async () =>
      (await page.textContent("#output")).includes("staged-content-4711"));
    const files = await until("its files back on its page", async () => {
      const xs = await page.$$eval("#outputs a", (as) => as.map((a) => [a.textContent, Number(a.dataset.size)]));
      return xs.some((x) => x[0] === "result.txt") ? xs : null;
    });
    const sizes = Object.fromEntries(files);
    if (sizes["result.txt"] !== 5 || sizes["staged-input.txt"] !== 20) {
      throw new Error(`the staged job's files came back wrong: ${JSON.stringify(files)}`);
    }
    console.log(`staged ${staged} ${JSON.stringify(files)}`);
  } catch (e) {
    if (artifacts) await page.screenshot({ path: path.join(artifacts, "faucets-failure.png"), fullPage: true }).catch(() => {});
    console.log("page text:", await page.textContent("body").catch(() => ""));
    throw e;
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(e.stack || String(e));
  process.exit(1);
});
