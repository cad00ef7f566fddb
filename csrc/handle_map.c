/* A small open-addressing hash map: handle bits -> pointer (linear probing). */
#include <stdlib.h>
#include <string.h>

#include "handle_map.h"

static size_t slot_of(const handle_map *m, uint64_t key)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ULL) >> 17) & m->mask;
}

void *map_get(const handle_map *m, uint64_t key)
{
    if (!m->keys)
        return NULL;
    for (size_t i = slot_of(m, key);; i = (i + 1) & m->mask) {
        if (m->keys[i] == key)
            return m->values[i];
        if (m->keys[i] == 0)
            return NULL;
    }
}

static void map_resize(handle_map *m, size_t capacity)
{
    handle_map old = *m;
    m->keys = calloc(capacity, sizeof *m->keys);
    m->values = calloc(capacity, sizeof *m->values);
    m->mask = capacity - 1;
    m->count = 0;
    for (size_t i = 0; old.keys && i <= old.mask; i++)
        if (old.keys[i])
            map_put(m, old.keys[i], old.values[i]);
    free(old.keys);
    free(old.values);
}

void map_put(handle_map *m, uint64_t key, void *value)
{
    if (!m->keys || (m->count + 1) * 2 > m->mask + 1)
        map_resize(m, m->keys ? (m->mask + 1) * 2 : 256);
    size_t i = slot_of(m, key);
    while (m->keys[i] && m->keys[i] != key)
        i = (i + 1) & m->mask;
    if (!m->keys[i])
        m->count++;
    m->keys[i] = key;
    m->values[i] = value;
}

/* Linear probing deletion by backward shift: no tombstones to accumulate. */
void map_remove(handle_map *m, uint64_t key)
{
    if (!m->keys)
        return;
    size_t i = slot_of(m, key);
    while (m->keys[i] != key) {
        if (!m->keys[i])
            return;
        i = (i + 1) & m->mask;
    }
    for (size_t j = (i + 1) & m->mask; m->keys[j]; j = (j + 1) & m->mask) {
        size_t home = slot_of(m, m->keys[j]);
        /* Move j into the hole at i when its home slot is not in (i, j]. */
        if (((j - home) & m->mask) >= ((j - i) & m->mask)) {
            m->keys[i] = m->keys[j];
            m->values[i] = m->values[j];
            i = j;
        }
    }
    m->keys[i] = 0;
    m->values[i] = NULL;
    m->count--;
}

uint64_t handle_key(const void *handle, size_t size)
{
    uint64_t key = 0;
    memcpy(&key, handle, size < sizeof key ? size : sizeof key);
    return key;
}
