// SPDX-License-Identifier: Apache-2.0
/* What the rendezvous record codecs share (state.c: the records; chunk.c: the assignment chunks).
 */
#ifndef EA_RDZV_STATE_INTERNAL_H
#define EA_RDZV_STATE_INTERNAL_H

#include <jansson.h>
#include <stddef.h>

#include "ea_error.h"

/* Dump `j` (stolen) compactly into *ret_json. */
int rdzv_json_dump(json_t *j, char **ret_json, struct ea_error *err);
/* Parse `json` (at most `max` bytes, else refused unparsed) and check the schema tag; *ret_root is
 * a new reference. `what` names the record in errors. */
int rdzv_json_load(const char *json, size_t len, const char *what, size_t max, json_t **ret_root,
                   struct ea_error *err);
/* Copy a string field into a fixed buffer, failing with a message naming it. */
int rdzv_copy_field(char *dst, size_t size, const char *src, const char *what, const char *field,
                    struct ea_error *err);

#endif
