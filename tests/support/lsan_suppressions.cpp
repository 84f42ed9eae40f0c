// lsan_suppressions: known leaks outside AQS, for sanitizer builds of this test.
//
// When a connection dies in the middle of a statement (the tests terminate
// backends and restart the server on purpose), libpq 15 keeps an error
// PGresult that nobody frees: about 1 KB per lost connection, inside
// libpq's own allocations. AQS never handles a raw PGresult, so only
// allocations made by libpq itself are suppressed.
extern "C" const char* __lsan_default_suppressions();
extern "C" const char* __lsan_default_suppressions() { return "leak:libpq.so\n"; }
