// aqs-sshare: Slurm's sshare over aqsd: the fair-share tree (shares, decayed
// usage, the fair-share factor of each account and user), as aqsd computes it
// for the multifactor priority. -a -l -n -p -P -u USERS -o FIELDS.
#include <cstdio>
#include <string>
#include <vector>

#include "core/text_util.hpp"
#include "slurm/accounting_format.hpp"
#include "slurm/slurm_client.hpp"

using namespace aqs;

namespace {

const char* k_usage =
    "Usage: sshare [-a] [-l] [-n] [-p|-P] [-u USER[,USER]] [-o FIELD[,FIELD]]\n"
    "  the fair-share tree: RawShares, NormShares, RawUsage, EffectvUsage, FairShare per account and user\n";

int run(const std::vector<std::string>& args) {
  bool long_list = false, header = true;
  slurm::print_style style = slurm::print_style::table;
  std::vector<std::string> users;
  std::string format;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](const char* opt) -> std::string {
      if (i + 1 >= args.size()) throw std::invalid_argument(std::string("option requires an argument -- '") + opt + "'");
      return args[++i];
    };
    if (a == "-a" || a == "--all") continue;
    if (a == "-l" || a == "--long") {
      long_list = true;
    } else if (a == "-n" || a == "--noheader") {
      header = false;
    } else if (a == "-p" || a == "--parsable") {
      style = slurm::print_style::parsable;
    } else if (a == "-P" || a == "--parsable2") {
      style = slurm::print_style::parsable2;
    } else if (a == "-u") {
      for (auto& u : slurm::comma_list(value("u"))) users.push_back(u);
    } else if (a.rfind("--users=", 0) == 0) {
      for (auto& u : slurm::comma_list(a.substr(8))) users.push_back(u);
    } else if (a == "-o") {
      format = value("o");
    } else if (a.rfind("--format=", 0) == 0) {
      format = a.substr(9);
    } else {
      throw std::invalid_argument("unrecognized option '" + a + "'");
    }
  }
  const auto fields = format.empty() ? slurm::sshare_default_format(long_list) : slurm::sshare_format(format);
  client::connection c(client::socket_path(std::nullopt));
  const nlohmann::json r = c.call(protocol::accounts{c.next_id(), "shares", {}, {}, {}, {}, false, {}, {}});
  core::fair_share_result fs;
  for (const auto& row : r.at("shares")) {
    core::share_row s;
    s.is_user = row.at("is_user").get<bool>();
    s.account = row.at("account").get<std::string>();
    s.user = row.at("user").get<std::string>();
    s.depth = row.at("depth").get<std::size_t>();
    s.raw_shares = row.at("raw_shares").get<std::uint32_t>();
    s.norm_shares = row.at("norm_shares").get<double>();
    s.raw_usage = row.at("raw_usage").get<double>();
    s.norm_usage = row.at("norm_usage").get<double>();
    s.effective_usage = row.at("effective_usage").get<double>();
    s.fairshare = row.at("fairshare").get<double>();
    fs.rows.push_back(std::move(s));
  }
  const std::string text = slurm::sshare_show(fs, fields, users, style, header);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return slurm::accounting_main(argc, argv, "sshare", k_usage, [](const std::vector<std::string>& args) { return run(args); });
}
