/* Seeded hashing of producer-chosen keys: SipHash-2-4 for names (the numeric mixers are inline
 * in engine_internal.h).
 */
#include "engine_internal.h"

/* ---- hashing --------------------------------------------------------------------------- */

/* Seeded hashing. Every table a producer's ids and names fill is keyed by the engine's seed,
 * so no stream can be precomputed to collide (a hostile producer would otherwise make probes
 * linear and the daemon quadratic). Output never depends on it: the report walks the
 * definition-ordered arrays and sorts on the contract's keys, tables only find things, and
 * every table grows on its entry count alone, so budgets run out at the same record whatever
 * the seed. The narrow live table (live_table.c) keeps a fixed hash: its cuckoo
 * displacement can fail, and a failure grows it, so a seeded layout could move the point
 * where the retention budget runs out; chosen ids there cost at most a growth each, which
 * scales every bucket index and breaks the collision.
 *
 * Names go through SipHash-2-4 (keyed 64-bit, streamed a byte at a time: definitions are
 * rare); numeric keys are packed injectively and finished with mix64 around the seed. */
static void sip_round(struct sip *h)
{
    h->v0 += h->v1; h->v1 = rotl64(h->v1, 13); h->v1 ^= h->v0; h->v0 = rotl64(h->v0, 32);
    h->v2 += h->v3; h->v3 = rotl64(h->v3, 16); h->v3 ^= h->v2;
    h->v0 += h->v3; h->v3 = rotl64(h->v3, 21); h->v3 ^= h->v0;
    h->v2 += h->v1; h->v1 = rotl64(h->v1, 17); h->v1 ^= h->v2; h->v2 = rotl64(h->v2, 32);
}

void jpe_sip_init(struct sip *h, uint64_t seed)
{
    uint64_t k0 = seed, k1 = mix64(seed ^ UINT64_C(0x5bd1e9955bd1e995));
    h->v0 = k0 ^ UINT64_C(0x736f6d6570736575);
    h->v1 = k1 ^ UINT64_C(0x646f72616e646f6d);
    h->v2 = k0 ^ UINT64_C(0x6c7967656e657261);
    h->v3 = k1 ^ UINT64_C(0x7465646279746573);
    h->m = 0;
    h->nb = h->len = 0;
}

static void sip_word(struct sip *h, uint64_t m)
{
    h->v3 ^= m;
    sip_round(h);
    sip_round(h);
    h->v0 ^= m;
}

void jpe_sip_bytes(struct sip *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h->m |= (uint64_t)s[i] << (8u * h->nb);
        h->len++;
        if (++h->nb == 8u) {
            sip_word(h, h->m);
            h->m = 0;
            h->nb = 0;
        }
    }
}

uint64_t jpe_sip_final(struct sip *h)
{
    sip_word(h, h->m | (uint64_t)(h->len & 0xffu) << 56);
    h->v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        sip_round(h);
    return h->v0 ^ h->v1 ^ h->v2 ^ h->v3;
}
