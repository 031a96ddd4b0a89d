/*
 * SHA-256 (FIPS 180-4), for content-addressed names: two payloads share a
 * name only when they are the same bytes. Prefix sh_.
 */
#ifndef WEFT_SHA256_H
#define WEFT_SHA256_H

#include <stddef.h>

/* The digest of data[0..len) as 64 lowercase hex digits and a NUL. */
void sh_sha256_hex(const void *data, size_t len, char out[65]);

#endif
