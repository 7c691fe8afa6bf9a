/* Seen by cppcheck only (scripts/lint.sh --include): criterion's test macros, reduced to what
 * cppcheck needs to parse the test files without the real headers. */
#define TestSuite(...)
#define Test(suite, name, ...) void suite##_##name(void)
#define ParameterizedTestParameters(suite, name) void suite##_##name##_params(void)
#define ParameterizedTest(t, suite, name, ...) void suite##_##name(t)
