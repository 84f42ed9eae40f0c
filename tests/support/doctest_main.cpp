// The one doctest main shared by every test executable, and a listener that
// remembers whether the running test case has failed (the cluster harness
// prints its daemons' logs then, so a failure in CI can be read afterwards).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>

#include <atomic>

#include "test_failed.hpp"

namespace aqs::test {

namespace {
std::atomic<bool> g_failed{false};

struct failure_listener : doctest::IReporter {
  explicit failure_listener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData&) override { g_failed = false; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override { g_failed = true; }
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& ad) override {
    if (ad.m_failed) g_failed = true;
  }
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
}  // namespace

bool current_test_failed() noexcept { return g_failed; }

}  // namespace aqs::test

DOCTEST_REGISTER_LISTENER("aqs_failure", 1, aqs::test::failure_listener);
