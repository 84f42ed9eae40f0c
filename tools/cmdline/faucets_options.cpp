// faucets_options: -M, --faucets, --faucets-ca and --token-file, checked.
#include "cmdline/faucets_options.hpp"

#include "cmdline/submit_options.hpp"
#include "cmdline/text_util.hpp"
#include "cmdline/usage_error.hpp"

namespace aqs::cmdline {

namespace {

bool valid_cluster_name(std::string_view n) {
  if (n.empty() || n.size() > 64) return false;
  for (const char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return n.front() != '-';
}

}  // namespace

void check_faucets_options(const faucets_options& o, cluster_choice what, bool socket_given, std::string_view cmd) {
  if (o.cluster) {
    const std::string& m = *o.cluster;
    const char* expected = what == cluster_choice::submit ? "auto or one cluster's name"
                           : what == cluster_choice::list ? "all or one cluster's name"
                                                          : "auto, all or one cluster's name";
    if (m.find(',') != std::string::npos) {
      throw usage_error("-M takes one cluster, not a list ('" + shown(m) + "'): " + expected);
    }
    if (what == cluster_choice::submit && m == "all") {
      throw usage_error("-M all: a job goes to one cluster; use -M auto to let the Faucets server choose");
    }
    if (what == cluster_choice::list && m == "auto") {
      throw usage_error("-M auto: use -M all for the jobs of every cluster, or one cluster's name");
    }
    if (!valid_cluster_name(m)) {
      throw usage_error("invalid cluster '" + shown(m) + "' for -M: expected " + expected +
                        " (letters, digits, '.', '_', '-')");
    }
  }
  if (!o.used() && (o.ca_file || o.token_file)) {
    throw usage_error(std::string(o.ca_file ? "--faucets-ca" : "--token-file") +
                      " goes with --faucets URL or -M (" + std::string(cmd) + " through a Faucets server)");
  }
  if (o.used() && socket_given) {
    throw usage_error("--socket is aqsd's; with " + std::string(o.url ? "--faucets" : "-M") +
                      " the command goes through the Faucets server instead: give one of them");
  }
  if (o.url && o.url->empty()) throw usage_error("empty value for --faucets");
  if (!o.stage_in.empty() && !o.used()) {
    throw usage_error("--stage-in goes with -M or --faucets (files sent with a job through a Faucets server)");
  }
  if (o.broker) {
    if (!o.used()) throw usage_error("--broker goes with -M or --faucets (a Faucets server's broker plugin)");
    if (!valid_cluster_name(*o.broker)) {
      throw usage_error("invalid broker plugin '" + shown(*o.broker) +
                        "' for --broker: a name the server's admin gave (letters, digits, '.', '_', '-')");
    }
  }
  if (o.contract.given()) {
    if (!o.used()) {
      throw usage_error("a contract (--deadline, --max-price, --value, --value-decay, --best-effort) goes with -M or "
                        "--faucets (" + std::string(cmd) + " through a Faucets server)");
    }
    if (!o.contract.deadline || !o.contract.max_price || !o.contract.value) {
      throw usage_error("a contract needs --deadline, --max-price and --value together");
    }
  }
}

std::string faucets_usage(cluster_choice what) {
  // The column each command's --help puts descriptions in.
  const std::size_t col = what == cluster_choice::submit ? 27 : what == cluster_choice::list ? 24 : 21;
  // fsub's -M and the three others are the submission options' (submit_options.hpp).
  std::string out;
  switch (what) {
    case cluster_choice::submit: break;
    case cluster_choice::list:
      out += help_line("-M, --clusters NAME",
                       "through a Faucets server: the jobs on cluster NAME, or all\n"
                       "(the default with --faucets); ID is the server's job id",
                       col);
      break;
    case cluster_choice::any:
      out += help_line("-M, --clusters NAME",
                       "through a Faucets server (NAME: all, auto or a cluster; the\n"
                       "IDs are the server's job ids, as fjobs -M all shows them)",
                       col);
      break;
  }
  for (const std::string_view name : {"clusters", "broker", "stage-in", "faucets", "faucets-ca", "token-file", "deadline", "max-price",
                                      "value", "value-decay", "best-effort"}) {
    const submit_option* o = find_option(name, option_scope::batch);
    if (what != cluster_choice::submit && (name == "clusters" || name == "broker")) continue;
    const bool contract = name != "faucets" && name != "faucets-ca" && name != "token-file" && name != "clusters" && name != "broker";
    if (what != cluster_choice::submit && contract) continue;  // the contract is fsub's
    out += help_line(o->usage, o->help, col);
  }
  return out;
}

}  // namespace aqs::cmdline
