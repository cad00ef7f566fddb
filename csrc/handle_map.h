/* A small open-addressing hash map from MPI handle bits to a pointer, for the
 * communicator and request tables. */
#ifndef MPIGRAPH_HANDLE_MAP_H
#define MPIGRAPH_HANDLE_MAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t *keys;  /* 0 = empty */
    void **values;
    size_t mask;     /* capacity - 1, capacity a power of two */
    size_t count;
} handle_map;

void *map_get(const handle_map *m, uint64_t key);
void map_put(handle_map *m, uint64_t key, void *value);
void map_remove(handle_map *m, uint64_t key);

/* The bits of an MPI handle (an int in MPICH, a pointer in Open MPI) as a key. */
uint64_t handle_key(const void *handle, size_t size);
#define HANDLE_KEY(h) handle_key(&(h), sizeof(h))

#endif
