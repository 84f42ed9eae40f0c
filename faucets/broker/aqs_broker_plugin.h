/* aqs_broker_plugin.h: the C ABI of a faucetsd broker plugin built as a shared
 * library (docs/admin-guide.md "Broker plugins"). Plain C so that a plugin
 * can be written in C, C++, Rust or anything that exports C symbols; it
 * needs nothing else from AQS.
 *
 * faucetsd never loads a plugin into its own process: it starts itself
 * again as a plugin host (a child process with a clean environment, a time
 * limit and bounded output), and the host dlopen()s DIR/NAME.so, checks the
 * ABI version, calls aqs_broker_rank() once with the request and prints the
 * answer. A plugin that crashes, hangs or answers garbage therefore costs
 * one decision, never the server.
 *
 * The request and the answer are the same JSON texts a program plugin reads
 * on stdin and prints on stdout:
 *   request  {"version": 1, "policy": "plugin:NAME",
 *             "job": {"id", "owner", "name", "min_pe", "max_pe", "adaptive",
 *                     "walltime_s", "gpus", "datasets"},
 *             "clusters": [{"name", "procs_total", "procs_free", "shrinkable",
 *                           "gpus_total", "gpus_free", "pending_jobs",
 *                           "pending_procs", "max_job_procs", "max_job_gpus",
 *                           "speed", "datasets", "latency_s",
 *                           "start_in_s" (a number or null)}, ...]}
 *   answer   ["best", "next", ...]
 *            or {"ranked": ["best", ...], "reason": "one line for the job's history"}
 * Only names from the request's "clusters" may appear, each at most once,
 * at least one; the first is the one faucetsd sends the job to.
 */
#ifndef AQS_BROKER_PLUGIN_H
#define AQS_BROKER_PLUGIN_H

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this ABI; aqs_broker_plugin_abi() must return it. */
#define AQS_BROKER_PLUGIN_ABI 1

/* Required. Returns AQS_BROKER_PLUGIN_ABI (the host refuses any other value,
 * so that a plugin built against a later, different ABI fails cleanly). */
int aqs_broker_plugin_abi(void);

/* Required. `request` is the NUL-terminated JSON request, owned by the
 * caller and valid only during the call. Returns a NUL-terminated JSON
 * answer that the plugin allocated; ownership passes to the caller, which
 * releases it with aqs_broker_free() when the plugin exports it, else with
 * free() (so allocate it with malloc() unless you export aqs_broker_free).
 * NULL means "no opinion": the server's default policy decides. Called once
 * per process: the plugin may keep no state between decisions. */
char* aqs_broker_rank(const char* request);

/* Optional. Releases an answer of aqs_broker_rank(). */
void aqs_broker_free(char* answer);

#ifdef __cplusplus
}
#endif

#endif /* AQS_BROKER_PLUGIN_H */
