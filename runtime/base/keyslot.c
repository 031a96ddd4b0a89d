/* Redis Cluster's key slots (base/keyslot.h). */
#include "base/keyslot.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* CRC16-CCITT (XMODEM) of each byte value, made at load: a byte at a time,
 * not a bit (every command's key slot, every run's partition) */
static uint16_t crc_table[256];

__attribute__((constructor)) static void crc_table_make(void)
{
    int v, b;
    for (v = 0; v < 256; v++) {
        uint16_t crc = (uint16_t)(v << 8);
        for (b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
        crc_table[v] = crc;
    }
}

uint16_t rc_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    size_t i;
    for (i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ crc_table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

int rc_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len), *close;
    if (open) {
        size_t from = (size_t)(open - key) + 1;
        close = memchr(open + 1, '}', len - from);
        /* a tag only when something is between the braces */
        if (close && close > open + 1) {
            key = open + 1;
            len = (size_t)(close - key);
        }
    }
    return rc_crc16(key, len) & (RC_SLOTS - 1);
}

int rc_range_of(const char *id, size_t len, int parts)
{
    return parts > 1 ? (int)((long)(rc_crc16(id, len) & (RC_SLOTS - 1)) * parts / RC_SLOTS) : 0;
}

int rc_part_of(const char *id, int parts)
{
    /* by the slot range of P{<id>}: partition i's tag is in the i-th range
     * (rc_part_tag), so where the ranges match the primaries a workflow's
     * decider queue entry is on its own node */
    return rc_range_of(id, strlen(id), parts);
}

int rc_part_of_crc(const char *id, int parts)
{
    return parts > 1 ? (int)(rc_crc16(id, strlen(id)) % (unsigned)parts) : 0;
}

void rc_range_tag(char *tag, size_t cap, const char *base, int label, int range, int parts)
{
    unsigned n;
    /* the first "<base><label>:<n>" whose slot lies in the range-th of parts
     * equal ranges: tags spread over the slots, so over the primaries of a
     * cluster whose slots were split in ranges (redis-cli --cluster create) */
    for (n = 0;; n++) {
        int s;
        if ((size_t)snprintf(tag, cap, "%s%d:%u", base, label, n) >= cap) return; /* cut */
        s = rc_key_slot(tag, strlen(tag));
        if ((long)s * parts / RC_SLOTS == range) return;
    }
}

void rc_part_tag(const char *base, int i, int parts, char tag[RC_TAG_MAX])
{
    char b[RC_TAG_MAX];
    if (parts <= 1) {
        snprintf(tag, RC_TAG_MAX, "%s", base);
        return;
    }
    snprintf(b, sizeof b, "%s:", base);
    rc_range_tag(tag, RC_TAG_MAX, b, i, i, parts);
}

int rc_redirect_parse(const char *text, int *slot, const char **host, size_t *hlen, int *port)
{
    const char *p = text ? strchr(text, ' ') : NULL, *at, *colon;
    char *end;
    long s, n;
    if (!p || p[1] < '0' || p[1] > '9') return -1;
    s = strtol(p + 1, &end, 10);
    if (*end != ' ' || s < 0 || s >= RC_SLOTS) return -1;
    at = end + 1;
    colon = strrchr(at, ':');
    if (!colon || colon == at || colon[1] < '0' || colon[1] > '9') return -1;
    n = strtol(colon + 1, &end, 10);
    if (*end || n <= 0 || n > 65535) return -1;
    *slot = (int)s;
    *host = at;
    *hlen = (size_t)(colon - at);
    *port = (int)n;
    return 0;
}
