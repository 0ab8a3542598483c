/* hlo/arena.c: bump allocator that owns all memory of a module or a pass.
 *
 * Memory comes in chunks that double in size (large requests get a chunk of their own);
 * every allocation is zeroed and 64-byte aligned, so literal data can be handed to vector
 * code directly. Nothing is freed individually: hlo_arena_free releases every chunk. */
#include "hlo.h"

#include <stdlib.h>
#include <string.h>

typedef struct Chunk {
  struct Chunk *next;                /* previously filled chunk */
  size_t size;                       /* usable bytes in data */
  size_t used;                       /* bytes handed out */
  _Alignas(64) unsigned char data[]; /* payload */
} Chunk;

struct HArena {
  Chunk *head;    /* current chunk */
  size_t next_sz; /* size of the next regular chunk */
  size_t total;   /* bytes handed out */
};

static Chunk *chunk_new(size_t size) {
  Chunk *c = aligned_alloc(64, (sizeof(Chunk) + size + 63) & ~(size_t)63);
  if (!c) {
    fprintf(stderr, "hloc: out of memory (arena chunk of %zu bytes)\n", size);
    exit(1);
  }
  c->next = NULL;
  c->size = size;
  c->used = 0;
  return c;
}

HArena *hlo_arena_new(void) {
  HArena *a = calloc(1, sizeof *a);
  if (!a) {
    fprintf(stderr, "hloc: out of memory\n");
    exit(1);
  }
  a->next_sz = 64 * 1024;
  return a;
}

void hlo_arena_free(HArena *a) {
  if (!a) return;
  for (Chunk *c = a->head, *n; c; c = n) {
    n = c->next;
    free(c);
  }
  free(a);
}

void *hlo_arena_alloc(HArena *a, size_t n) {
  size_t need = (n + 63) & ~(size_t)63;
  if (need == 0) need = 64;
  Chunk *c = a->head;
  if (!c || c->size - c->used < need) {
    if (need > a->next_sz / 4) {
      /* big block: own chunk, linked behind the current one so the current stays usable */
      Chunk *big = chunk_new(need);
      big->used = need;
      if (c) {
        big->next = c->next;
        c->next = big;
      } else {
        a->head = big;
      }
      memset(big->data, 0, need);
      a->total += need;
      return big->data;
    }
    c = chunk_new(a->next_sz);
    c->next = a->head;
    a->head = c;
    if (a->next_sz < (64u << 20)) a->next_sz *= 2;
  }
  void *p = c->data + c->used;
  c->used += need;
  a->total += need;
  memset(p, 0, need);
  return p;
}

char *hlo_arena_strndup(HArena *a, const char *s, size_t n) {
  char *d = hlo_arena_alloc(a, n + 1);
  memcpy(d, s, n);
  d[n] = 0;
  return d;
}

char *hlo_arena_strdup(HArena *a, const char *s) { return hlo_arena_strndup(a, s, strlen(s)); }

void *hlo_arena_memdup(HArena *a, const void *p, size_t n) {
  void *d = hlo_arena_alloc(a, n);
  if (n) memcpy(d, p, n);
  return d;
}

char *hlo_arena_printf(HArena *a, const char *fmt, ...) {
  va_list ap, ap2;
  va_start(ap, fmt);
  va_copy(ap2, ap);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  char *d = hlo_arena_alloc(a, (size_t)n + 1);
  vsnprintf(d, (size_t)n + 1, fmt, ap2);
  va_end(ap2);
  return d;
}

size_t hlo_arena_used(const HArena *a) { return a->total; }

void *hlo_arena_grow(HArena *a, void *arr, int n, int *cap, int first, size_t elem) {
  if (n < *cap) return arr;
  int ncap = *cap ? *cap * 2 : first;
  void *g = hlo_arena_alloc(a, elem * (size_t)ncap);
  if (n) memcpy(g, arr, elem * (size_t)n);
  *cap = ncap;
  return g;
}
