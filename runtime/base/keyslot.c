/* Redis Cluster's key slots (base/keyslot.h). */
#include "base/keyslot.h"

#include <string.h>

uint16_t rc_crc16(const char *buf, size_t len)
{
    uint16_t crc = 0;
    size_t i;
    int b;
    for (i = 0; i < len; i++) {
        crc ^= (uint16_t)((unsigned char)buf[i] << 8);
        for (b = 0; b < 8; b++)
            crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    }
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
