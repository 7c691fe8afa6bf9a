// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz targets: each file defines LLVMFuzzerTestOneInput. With clang and -DEA_FUZZ=ON they link
 * against libFuzzer (scripts/fuzz.sh); in every build they also link against replay_main.c, which
 * feeds the files of the target's corpus (tests/fuzz/corpus/<target>/) one by one, so any input
 * that once crashed stays a regression test (ctest -L fuzz).
 */
#ifndef EA_TESTS_FUZZ_H
#define EA_TESTS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* An invariant of the code under test (not compiled out by NDEBUG): a failure is a finding. */
#define FUZZ_CHECK(c)                                                                      \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #c);     \
            abort();                                                                       \
        }                                                                                  \
    } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#endif
