/*
 * Which of Redis Cluster's 16384 slots a key is in: CRC16 of the key, or of
 * its hash tag (the part between the first '{' and the next '}' when that
 * part is not empty). Shared by the store and the lock_redis plugin (which
 * compiles this file in). Prefix rc_.
 */
#ifndef WEFT_BASE_KEYSLOT_H
#define WEFT_BASE_KEYSLOT_H

#include <stddef.h>
#include <stdint.h>

#define RC_SLOTS 16384

/* CRC16-CCITT (XMODEM), as Redis Cluster computes it. */
uint16_t rc_crc16(const char *buf, size_t len);

/* The slot of key (len bytes), hash tags honoured. */
int rc_key_slot(const char *key, size_t len);

/* Keys every workflow touches are spread over parts partitions, each a
 * hash tag of its own: the partition of a workflow id (0 when parts <= 1),
 * the one whose slot range holds the id's own slot. */
int rc_part_of(const char *id, int parts);
/* Which of parts equal slot ranges holds the slot of id (len bytes, no
 * hash tag): 0 when parts <= 1. */
int rc_range_of(const char *id, size_t len, int parts);
/* The partition of a layout from before (its "parts_by" is not "slot"): the
 * CRC16 of the id, modulo parts. */
int rc_part_of_crc(const char *id, int parts);

#define RC_TAG_MAX 48
/* The hash tag of partition i of parts: base itself when parts <= 1 (the
 * key names of a single Redis stay as they were), else "<base>:<i>:<n>",
 * n chosen so that the tag's slot is in the i-th of parts equal slot ranges. */
void rc_part_tag(const char *base, int i, int parts, char tag[RC_TAG_MAX]);

/* The first "<base><label>:<n>" (n = 0, 1, ...) whose slot lies in the
 * range-th of parts equal slot ranges, into tag (cap bytes; base must leave
 * room for the digits: a tag cut short is returned as it is). */
void rc_range_tag(char *tag, size_t cap, const char *base, int label, int range, int parts);

/* A redirection's text, "MOVED <slot> <host>:<port>" (or ASK): its slot, the
 * host (hlen bytes, in text) and port. 0, or -1 when it is not one (a slot
 * past 16383, no host, a port that is not 1-65535, anything after it). */
int rc_redirect_parse(const char *text, int *slot, const char **host, size_t *hlen, int *port);

#endif
