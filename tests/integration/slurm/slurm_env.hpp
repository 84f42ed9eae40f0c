// slurm_env: the Slurm-compatible commands under their Slurm names (a
// private bin directory of symlinks on the PATH), run as a tool would run
// them, for the Slurm integration tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "aqs_cluster.hpp"
#include "run_users.hpp"
#include "test_pg.hpp"

namespace aqs::test {

namespace fs = std::filesystem;

inline const std::vector<std::string> k_slurm_names = {"sbatch", "srun", "squeue", "scancel", "sinfo", "sacct", "scontrol", "salloc"};

// A private bin directory of symlinks sbatch -> .../aqs-sbatch, ...
inline fs::path slurm_bin(const cluster& c) {
  const fs::path bin = c.dir() / "slurm-bin";
  fs::create_directories(bin);
  for (const auto& n : k_slurm_names) {
    const fs::path link = bin / n;
    if (!fs::exists(fs::symlink_status(link))) fs::create_symlink(fs::path(AQS_SLURM_BIN_DIR) / ("aqs-" + n), link);
  }
  fs::permissions(bin, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read |
                           fs::perms::others_exec);
  return bin;
}

struct slurm_env {
  cluster& c;
  fs::path bin;
  std::map<std::string, std::string> env(const std::string& user = "root") const {
    return {{"AQS_SOCKET", c.socket()},
            {"PATH", bin.string() + ":/usr/local/bin:/usr/bin:/bin"},
            {"USER", user},
            {"TZ", "UTC"}};
  }
  // A Slurm command by its Slurm name, found on the PATH as a tool would.
  run_result run(const std::string& name, std::vector<std::string> args, const test_user* as = nullptr,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) const {
    args.insert(args.begin(), (bin / name).string());
    std::optional<uid_t> uid;
    std::optional<gid_t> gid;
    if (as != nullptr) {
      uid = as->uid;
      gid = as->gid;
    }
    const std::string cwd = as != nullptr ? as->home.string() : c.workdir().string();
    return aqs::test::run(args, env(as != nullptr ? as->name : "root"), uid, gid, cwd, timeout);
  }
  // sh -c SCRIPT with the Slurm names on the PATH.
  run_result sh(const std::string& script, const test_user* as = nullptr) const {
    return run_argv({"/bin/sh", "-c", script}, as);
  }
  run_result run_argv(const std::vector<std::string>& argv, const test_user* as = nullptr,
                            std::chrono::milliseconds timeout = std::chrono::seconds(60), std::string cwd = "") const {
    std::optional<uid_t> uid;
    std::optional<gid_t> gid;
    if (as != nullptr) {
      uid = as->uid;
      gid = as->gid;
    }
    if (cwd.empty()) cwd = as != nullptr ? as->home.string() : c.workdir().string();
    return aqs::test::run(argv, env(as != nullptr ? as->name : "root"), uid, gid, cwd, timeout);
  }
};

// What a Slurm test case starts from: a cluster of the shape `shape` gives
// on the test database, the Slurm names (slurm_bin), and the throwaway user
// `user`, made for this run.
struct slurm_case {
  test_database db;
  cluster c;
  slurm_env s;
  test_user u;
  slurm_case(cluster::options (*shape)(const test_database&, int), int size, const std::string& user)
      : c(shape(db, size)), s{c, slurm_bin(c)}, u(made_user(c, user)) {}

private:
  static test_user made_user(cluster& c, const std::string& name) {
    users().ensure(name);
    return c.user(name);
  }
};

}  // namespace aqs::test
