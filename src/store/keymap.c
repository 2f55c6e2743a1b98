/* Key sets (sw_keymap, store_internal.h): open addressing, linear probing,
 * backward-shift erase. The unprovable keys of a handle, and at open the
 * keys the journal deleted. */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

sw_keymap_ent *sw_keymap_find(const sw_keymap *m, const sw_store_key *k)
{
    if (!m->n)
        return NULL;
    for (uint64_t i = sw_store_key_hash(k) & m->mask;; i = (i + 1) & m->mask) {
        sw_keymap_ent *e = &m->a[i];
        if (!e->used)
            return NULL;
        if (sw_store_key_eq(&e->key, k))
            return e;
    }
}

static sw_status keymap_grow(sw_keymap *m)
{
    uint64_t cap = m->a ? 2 * (m->mask + 1) : 16;
    sw_keymap_ent *a = (sw_keymap_ent *)calloc(cap, sizeof *a);
    if (!a)
        return sw_fail(SW_STATUS_NO_MEMORY, "key set of %llu entries", (unsigned long long)cap);
    for (uint64_t i = 0; m->a && i <= m->mask; i++) {
        if (!m->a[i].used)
            continue;
        uint64_t j = sw_store_key_hash(&m->a[i].key) & (cap - 1);
        while (a[j].used)
            j = (j + 1) & (cap - 1);
        a[j] = m->a[i];
    }
    free(m->a);
    m->a = a;
    m->mask = cap - 1;
    return SW_OK;
}

sw_status sw_keymap_put(sw_keymap *m, const sw_store_key *k, uint64_t seq)
{
    sw_keymap_ent *e = sw_keymap_find(m, k);
    if (e) {
        e->seq = seq;
        return SW_OK;
    }
    if (!m->a || (m->n + 1) * 2 > m->mask + 1)
        SW_TRY(keymap_grow(m));
    uint64_t i = sw_store_key_hash(k) & m->mask;
    while (m->a[i].used)
        i = (i + 1) & m->mask;
    m->a[i].key = *k;
    m->a[i].key.reserved = 0;
    m->a[i].seq = seq;
    m->a[i].used = 1;
    m->n++;
    return SW_OK;
}

void sw_keymap_erase(sw_keymap *m, const sw_store_key *k)
{
    if (!m->n)
        return;
    uint64_t i = sw_store_key_hash(k) & m->mask;
    for (;; i = (i + 1) & m->mask) {
        if (!m->a[i].used)
            return;
        if (sw_store_key_eq(&m->a[i].key, k))
            break;
    }
    m->a[i].used = 0;
    m->n--;
    /* backward shift: no tombstones in the probe sequences */
    for (uint64_t j = (i + 1) & m->mask; m->a[j].used; j = (j + 1) & m->mask) {
        uint64_t h = sw_store_key_hash(&m->a[j].key) & m->mask;
        int between = i <= j ? (h > i && h <= j) : (h > i || h <= j);
        if (!between) {
            m->a[i] = m->a[j];
            m->a[j].used = 0;
            i = j;
        }
    }
}

void sw_keymap_free(sw_keymap *m)
{
    free(m->a);
    memset(m, 0, sizeof *m);
}
