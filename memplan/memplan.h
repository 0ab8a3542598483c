/* memplan/memplan.h: buffer assignment for the entry computation.
 *
 * Decides where every value of the entry computation lives when the compiled code runs:
 * parameters in the caller's args[], constants in read-only data, result leaves straight in
 * the caller's results[], views (reshape, bitcast, get-tuple-element) inside the buffer they
 * view, elementwise users in place of an operand whose last use they are, and every other
 * temporary in one scratch heap laid out best-fit by decreasing size. Offsets are in bytes
 * and every temporary is 64-byte aligned; MemPlan.temp_bytes is the scratch the caller
 * provides. */
#ifndef HLOC_MEMPLAN_H
#define HLOC_MEMPLAN_H

#include "hlo.h"

#define MEMPLAN_ALIGN 64 /* alignment of every temporary (bytes) */

typedef enum MemKind {
  MEM_NONE,   /* no storage: tuple instruction, token */
  MEM_PARAM,  /* the caller's args[param] */
  MEM_CONST,  /* the instruction's literal in read-only data */
  MEM_TEMP,   /* scratch heap at [offset, offset + size) */
  MEM_RESULT, /* the caller's results[result] */
  MEM_ALIAS,  /* the buffer of instruction `alias` (operand), at byte `offset` inside it */
} MemKind;

typedef struct MemBuf {
  MemKind kind;   /* where the value lives */
  int64_t offset; /* MEM_TEMP: offset in the heap; MEM_ALIAS: byte offset in the aliased buffer */
  int64_t size;   /* bytes of the value (a tuple-shaped value: all its leaves, each aligned) */
  int64_t param;  /* MEM_PARAM: parameter number */
  int result;     /* MEM_RESULT: result leaf index */
  int alias;      /* MEM_ALIAS: index (in the computation) of the instruction aliased */
  bool view;      /* MEM_ALIAS: a pure view (no code runs); false: computed in place */
  int start, end; /* MEM_TEMP: live range, instruction positions (inclusive) */
} MemBuf;

/* One leaf of the entry result, flattened in tuple order. */
typedef struct MemResult {
  int instr;      /* index of the instruction whose buffer holds the leaf value */
  int64_t offset; /* byte offset of the leaf inside that buffer */
  int64_t size;   /* bytes */
  bool copy;      /* the value is not computed into results[k]: copy it there at the end */
  Shape shape;    /* the leaf's array shape */
} MemResult;

typedef struct MemPlan {
  int ninstrs;        /* instructions of the computation planned */
  MemBuf *bufs;       /* per instruction, indexed like comp->instrs */
  int nresults;       /* result leaves */
  MemResult *results; /* result leaves in order */
  int64_t temp_bytes; /* size of the scratch heap (multiple of MEMPLAN_ALIGN) */
  int64_t peak_live;  /* lower bound: most temporary bytes live at one position */
} MemPlan;

/* Plan the buffers of `entry` in its instruction order (renumbers it). Arrays come from a.
 * false with a located error for what cannot be planned (tuple-shaped parameters). */
bool memplan_assign(HComp *entry, HArena *a, MemPlan *out, HErr *err);
/* Follow aliases from instruction i to the instruction that owns the storage; *offset gets
 * the byte offset of i's value inside it. */
int memplan_base(const MemPlan *p, int i, int64_t *offset);
/* Byte offset of element `index` (tuple path of depth 1) inside a tuple-shaped block. */
int64_t memplan_tuple_offset(const Shape *s, int64_t index);
/* Bytes of a value in a buffer: arrays their data, tuples their leaves each aligned. */
int64_t memplan_value_bytes(const Shape *s);
/* Whether fusion/elementwise instruction `user` reads its operand `opnd` only at the index
 * it writes (so it may overwrite that operand in place). */
bool memplan_reads_elementwise(const HInstr *user, int opnd);

#endif
