// waits: what both browser scripts (dashboard.mjs, faucets.mjs) wait and log
// with: the environment they are given, a deadline for anything that waits
// on the system (the machine may be busy), and a poll until a condition holds.

// The variable `name`, or `fallback`; neither is an error naming it.
export const env = (name, fallback) => {
  const v = process.env[name] ?? fallback;
  if (v === undefined) throw new Error(`${name} is not set`);
  return v;
};
export const long = 120_000;  // ms
export const log = (...a) => console.log(new Date().toISOString(), ...a);
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls `fn` every `every` ms until it returns something truthy (returned),
// or fails after `timeout` with what it waited for and its last error.
export async function until(what, fn, timeout = long, every = 100) {
  const end = Date.now() + timeout;
  let last;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}` + (last ? `: ${last.message}` : ""));
    await sleep(every);
  }
}
