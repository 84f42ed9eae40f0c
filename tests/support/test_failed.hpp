// Whether the test case now running has had a failed check (or threw).
#pragma once

namespace aqs::test {
bool current_test_failed() noexcept;
}
