/* Seen by cppcheck only (scripts/lint.sh --include): criterion's test macros, reduced to what
 * cppcheck needs to parse the test files without the real headers. */
#define TestSuite(...)
#define Test(suite, name, ...) void suite##_##name(void)
#define ParameterizedTestParameters(suite, name) void suite##_##name##_params(void)
#define ParameterizedTest(t, suite, name, ...) void suite##_##name(t)
/* jansson's iteration macros (a for loop over the array or object) */
#define json_array_foreach(array, index, value) \
    for ((index) = 0, (value) = json_array_get(array, 0); (value); (value) = NULL)
#define json_object_foreach(object, key, value) for ((key) = 0; (key) != 0;)
