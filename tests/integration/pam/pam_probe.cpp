// pam_probe SERVICE USER: runs PAM's account stage for USER through SERVICE
// (as sshd would), then prints what that left in this process: the PAM
// result, the module's messages, the job it was tagged with and its cgroups.
#include <security/pam_appl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

namespace {

int converse(int n, const pam_message** msg, pam_response** resp, void*) {
  auto* r = static_cast<pam_response*>(std::calloc(static_cast<std::size_t>(n), sizeof(pam_response)));
  if (r == nullptr) return PAM_BUF_ERR;
  for (int i = 0; i < n; ++i) std::cout << "message: " << msg[i]->msg << "\n";
  *resp = r;
  return PAM_SUCCESS;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: pam_probe SERVICE USER\n");
    return 2;
  }
  pam_conv conv{converse, nullptr};
  pam_handle_t* h = nullptr;
  if (pam_start(argv[1], argv[2], &conv, &h) != PAM_SUCCESS) {
    std::fprintf(stderr, "pam_probe: pam_start failed\n");
    return 2;
  }
  const int rc = pam_acct_mgmt(h, 0);
  std::cout << "result: " << (rc == PAM_SUCCESS ? "let in" : pam_strerror(h, rc)) << "\n";
  const char* job = pam_getenv(h, "AQS_JOB_ID");
  std::cout << "job: " << (job != nullptr ? job : "none") << "\n";
  std::ifstream cg("/proc/self/cgroup");
  for (std::string line; std::getline(cg, line);) std::cout << "cgroup: " << line << "\n";
  pam_end(h, rc);
  return rc == PAM_SUCCESS ? 0 : 1;
}
