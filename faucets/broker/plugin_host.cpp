// plugin_host: finding a broker plugin safely, its request and answer, and
// the shared-library host that faucetsd runs as a child.
#include "broker/plugin_host.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <set>

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include "broker/aqs_broker_plugin.h"

namespace aqs::faucets {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr std::size_t k_max_request = 16 << 20;

// The plugin's own reason, made one printable line of at most 200 characters.
std::string clean_line(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '\n' || c == '\r' || out.size() >= 200) break;
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out;
}

// Why `p` (already resolved) is not safe to run code from, or nullopt.
std::optional<std::string> unsafe(const fs::path& p, const char* what) {
  struct stat st{};
  if (::stat(p.c_str(), &st) != 0) return std::string(what) + " " + p.string() + " cannot be read: " + std::strerror(errno);
  if (st.st_uid != 0 && st.st_uid != ::geteuid()) {
    return std::string(what) + " " + p.string() + " is owned by uid " + std::to_string(st.st_uid) +
           ": it must be root's or faucetsd's own";
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return std::string(what) + " " + p.string() + " is writable by group or others: whoever can write it runs code as faucetsd";
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> plugin_name_of(std::string_view policy) {
  constexpr std::string_view prefix = "plugin:";
  if (!policy.starts_with(prefix)) return std::nullopt;
  return std::string(policy.substr(prefix.size()));
}

std::optional<std::string> bad_plugin_name(std::string_view name) {
  if (name.empty()) return std::string("empty broker plugin name");
  if (name.find('/') != std::string_view::npos || name.find("..") != std::string_view::npos) {
    return "broker plugin name '" + std::string(name.substr(0, 64)) + "' is not a name: no '/' or '..' (plugins are looked up by name in the admin's plugin directory only)";
  }
  bool ok = name.size() <= 64 && name.front() != '.' && name.front() != '-';
  for (const char c : name) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  }
  if (!ok) return "invalid broker plugin name (letters, digits, '.', '_', '-', at most 64, not starting with '.' or '-')";
  return std::nullopt;
}

json plugin_request(std::string_view name, const plugin_job& job, std::span<const cluster_view> clusters) {
  json cs = json::array();
  for (const cluster_view& c : clusters) {
    cs.push_back(json{{"name", c.name},
                      {"procs_total", c.procs_total},
                      {"procs_free", c.procs_free},
                      {"shrinkable", c.shrinkable},
                      {"gpus_total", c.gpus_total},
                      {"gpus_free", c.gpus_free},
                      {"pending_jobs", c.pending_jobs},
                      {"pending_procs", c.pending_procs},
                      {"max_job_procs", c.max_job_procs},
                      {"max_job_gpus", c.max_job_gpus},
                      {"speed", c.speed},
                      {"datasets", c.datasets},
                      {"latency_s", c.latency_s},
                      {"start_in_s", c.start_in_s ? json(*c.start_in_s) : json(nullptr)}});
  }
  return json{{"version", AQS_BROKER_PLUGIN_ABI},
              {"policy", "plugin:" + std::string(name)},
              {"job", json{{"id", job.id},
                           {"owner", job.owner},
                           {"name", job.name},
                           {"min_pe", job.ask.min_pe},
                           {"max_pe", job.ask.max_pe},
                           {"adaptive", job.ask.adaptive},
                           {"walltime_s", job.ask.walltime_s},
                           {"gpus", job.ask.gpus},
                           {"datasets", job.ask.datasets}}},
              {"clusters", cs}};
}

plugin_ranking parse_plugin_answer(const std::string& text, std::span<const cluster_view> clusters) {
  plugin_ranking r;
  auto fail = [&](std::string why) {
    r.ranked.clear();
    r.failure = std::move(why);
    return r;
  };
  json j;
  try {
    j = json::parse(text);
  } catch (const std::exception&) {
    return fail("its answer is not JSON: '" + clean_line(text.substr(0, 60)) + "'");
  }
  json list;
  if (j.is_array()) {
    list = j;
  } else if (j.is_object() && j.contains("ranked") && j["ranked"].is_array()) {
    list = j["ranked"];
    if (const auto it = j.find("reason"); it != j.end()) {
      if (!it->is_string()) return fail("its answer's \"reason\" is not a string");
      r.reason = clean_line(it->get<std::string>());
    }
  } else {
    return fail("its answer is neither a list of cluster names nor {\"ranked\": [...]}");
  }
  std::set<std::string> known, seen;
  for (const cluster_view& c : clusters) known.insert(c.name);
  for (const auto& v : list) {
    if (!v.is_string()) return fail("its ranking holds something other than a cluster name");
    const std::string n = v.get<std::string>();
    if (!known.contains(n)) return fail("it ranked '" + clean_line(n.substr(0, 64)) + "', which is not a candidate cluster");
    if (!seen.insert(n).second) return fail("it ranked '" + n + "' twice");
    r.ranked.push_back(n);
  }
  if (r.ranked.empty()) return fail("it ranked no cluster");
  return r;
}

plugin_host::plugin_host(plugin_options options) : options_(std::move(options)) {}

plugin_host::found plugin_host::find(std::string_view name) const {
  if (const auto why = bad_plugin_name(name)) throw plugin_error(*why);
  if (options_.dir.empty()) {
    throw plugin_error("broker plugin '" + std::string(name) + "': no plugin directory (faucetsd --plugin-dir DIR)");
  }
  const fs::path dir = options_.dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw plugin_error("plugin directory " + dir.string() + " is not a directory");
  if (const auto why = unsafe(dir, "plugin directory")) throw plugin_error(*why);
  found f;
  const fs::path so = dir / (std::string(name) + ".so"), prog = dir / std::string(name);
  if (fs::exists(so, ec)) {
    f.file = so;
    f.library = true;
  } else if (fs::exists(prog, ec)) {
    f.file = prog;
  } else {
    throw plugin_error("unknown broker plugin '" + std::string(name) + "' (looked for " + std::string(name) + ".so and " +
                       std::string(name) + " in " + dir.string() + ")");
  }
  // A symlink the admin put there may point anywhere; what it points at must be safe too.
  const fs::path real = fs::canonical(f.file, ec);
  if (ec) throw plugin_error("broker plugin " + f.file.string() + " cannot be resolved: " + ec.message());
  if (!fs::is_regular_file(real, ec)) throw plugin_error("broker plugin " + f.file.string() + " is not a regular file");
  if (const auto why = unsafe(real, "broker plugin")) throw plugin_error(*why);
  if (!f.library && ::access(real.c_str(), X_OK) != 0) {
    throw plugin_error("broker plugin " + f.file.string() + " is not executable (chmod 0755, or name a library NAME.so)");
  }
  f.file = real;
  return f;
}

void plugin_host::check(std::string_view name) const {
  const found f = find(name);
  if (!f.library) return;
  if (options_.library_host.empty()) throw plugin_error("no host for library plugins");
  const run_outcome o = run_plugin_program({options_.library_host.string(), "--broker-plugin-host", "--check", f.file.string()},
                                           "", std::string(name), options_.limits);
  if (!o.ok) throw plugin_error("broker plugin " + f.file.string() + " cannot be loaded: " + o.failure);
}

plugin_ranking plugin_host::rank(std::string_view name, const plugin_job& job, std::span<const cluster_view> clusters) const {
  plugin_ranking r;
  found f;
  try {
    f = find(name);  // again: the admin may have changed the directory since
  } catch (const plugin_error& e) {
    r.failure = e.what();
    return r;
  }
  std::vector<std::string> argv;
  if (f.library) {
    argv = {options_.library_host.string(), "--broker-plugin-host", f.file.string()};
  } else {
    argv = {f.file.string()};
  }
  run_outcome o;
  try {
    o = run_plugin_program(argv, plugin_request(name, job, clusters).dump() + "\n", std::string(name), options_.limits);
  } catch (const std::exception& e) {
    r.failure = std::string("cannot start it: ") + e.what();
    return r;
  }
  if (!o.ok) {
    r.failure = o.failure;
    return r;
  }
  return parse_plugin_answer(o.output, clusters);
}

int run_library_host(int argc, char** argv) {
  bool check_only = false;
  int i = 2;  // argv[1] is --broker-plugin-host
  if (i < argc && std::strcmp(argv[i], "--check") == 0) {
    check_only = true;
    ++i;
  }
  if (i + 1 != argc) {
    std::fprintf(stderr, "usage: faucetsd --broker-plugin-host [--check] FILE.so\n");
    return 1;
  }
  const char* file = argv[i];
  void* lib = ::dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", ::dlerror());
    return 1;
  }
  using abi_fn = int (*)();
  using rank_fn = char* (*)(const char*);
  using free_fn = void (*)(char*);
  const auto abi = reinterpret_cast<abi_fn>(::dlsym(lib, "aqs_broker_plugin_abi"));
  const auto rank = reinterpret_cast<rank_fn>(::dlsym(lib, "aqs_broker_rank"));
  const auto release = reinterpret_cast<free_fn>(::dlsym(lib, "aqs_broker_free"));
  if (abi == nullptr || rank == nullptr) {
    std::fprintf(stderr, "%s does not export aqs_broker_plugin_abi and aqs_broker_rank (aqs_broker_plugin.h)\n", file);
    return 1;
  }
  if (const int v = abi(); v != AQS_BROKER_PLUGIN_ABI) {
    std::fprintf(stderr, "%s is built for broker plugin ABI %d, this faucetsd speaks %d\n", file, v, AQS_BROKER_PLUGIN_ABI);
    return 1;
  }
  if (check_only) return 0;
  std::string request;
  char buf[65536];
  for (std::size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) {
    request.append(buf, n);
    if (request.size() > k_max_request) {
      std::fprintf(stderr, "request larger than %zu bytes\n", k_max_request);
      return 1;
    }
  }
  char* answer = rank(request.c_str());
  if (answer == nullptr) {
    std::fprintf(stderr, "aqs_broker_rank returned NULL (no opinion)\n");
    return 1;
  }
  std::fputs(answer, stdout);
  if (release != nullptr) {
    release(answer);
  } else {
    std::free(answer);
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace aqs::faucets
