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

/* n rounded up to a multiple of MEMPLAN_ALIGN. */
static inline int64_t memplan_align(int64_t n) {
  return (n + MEMPLAN_ALIGN - 1) / MEMPLAN_ALIGN * MEMPLAN_ALIGN;
}

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
  int instr;           /* index of the instruction whose buffer holds the leaf value */
  int64_t offset;      /* byte offset of the leaf inside that buffer */
  int64_t size;        /* bytes */
  bool copy;           /* the value is not computed into results[k]: copy it there at the end */
  Shape shape;         /* the leaf's array shape */
  int name;            /* index of the instruction whose name the leaf takes: the value the root
                          lists (a leaf inside a block: the block value it belongs to) */
  int64_t alias_param; /* input_output_alias: the parameter whose buffer the caller may pass
                          as results[k] (same pointer for args[p] and results[k]); -1: the
                          caller must pass distinct buffers (no alias declared, or the plan
                          could not honour it, see memplan_assign) */
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
 * false with a located error for what cannot be planned (tuple-shaped parameters of the
 * module's entry). Another computation (a while loop's body or condition) may be planned the
 * same way: its tuple-shaped parameter is one block (MEM_PARAM) laid out like a tuple-shaped
 * computed value, and no input/output aliases apply.
 *
 * Input/output aliasing (the module's input_output_alias, may- or must-alias): for a result
 * leaf k declared to alias array parameter p, the plan makes it safe for the caller to pass
 * the same buffer as args[p] and results[k] (results[k].alias_param = p): the leaf is
 * computed into results[k] only by an instruction that comes after every read of parameter
 * p (or reads it elementwise, in place), otherwise it is computed into scratch and copied at
 * the end, after every kernel has run. Aliasing is refused (alias_param = -1) when another
 * result leaf is a copy of parameter p itself or the leaf is parameter p unchanged. The
 * caller may always pass distinct buffers instead. */
bool memplan_assign(HComp *entry, HArena *a, MemPlan *out, HErr *err);
/* A while loop's init value as the flat leaves of its state (through tuples and their elements;
 * a leaf of a block at its offset): per leaf the instruction whose storage holds it, the byte
 * there and its bytes, and whether the body passes it through at its own place unchanged (a
 * flat state's weights, the scanned inputs: the loop may read it where the init value is). */
typedef struct MemLoopInit {
  int n;
  const HInstr **src;
  int64_t *off, *bytes;
  bool *invariant;
} MemLoopInit;
void memplan_loop_init(HArena *a, const HInstr *w, MemLoopInit *out);
/* Value v's flat leaves the same way (through tuples and their elements), each marked
 * invariant: where a conditional's branch reads its operand. */
void memplan_value_leaves(HArena *a, const HInstr *v, MemLoopInit *out);
/* Whether leaf j of loop w's result is read in computation c (w's): a get-tuple-element of it,
 * or any other use of the whole state. */
bool memplan_leaf_read(const HComp *c, const HInstr *w, int j);
/* Whether a loop's body planned by bp leaves result leaf r where it is in the state of shape
 * state: a leaf passed through at its own place, or updated in place (memplan_assign_body),
 * neither computed into nor copied through a next state. */
bool memplan_leaf_stays(const MemPlan *bp, const Shape *state, int r);
/* A while loop's body: memplan_assign, then a result leaf r computed by an instruction that reads
 * leaf r of the state (the tuple parameter) in place (elementwise, or as a dynamic-update-slice's
 * operand) and after every other read of it, or that reads none of it after every read of it
 * (an LSTM's h, read by the product before the gates compute the new one), is computed into the
 * state itself: results[r] is
 * then a copy of that leaf, which the targets leave where it is (the scan's hidden state and its
 * outputs updated in place, not copied to the next state and back every trip). */
bool memplan_assign_body(HComp *body, HArena *a, MemPlan *out, HErr *err);
/* Follow aliases from instruction i to the instruction that owns the storage; *offset gets
 * the byte offset of i's value inside it. */
int memplan_base(const MemPlan *p, int i, int64_t *offset);
/* Byte offset of element `index` (tuple path of depth 1) inside a tuple-shaped block. */
int64_t memplan_tuple_offset(const Shape *s, int64_t index);
/* Byte offset of flat leaf k (depth first, nested tuples flattened) inside a tuple-shaped
 * block of shape s; 0 for an array. */
int64_t memplan_leaf_offset(const Shape *s, int k);
/* Bytes of a value in a buffer: arrays their data, tuples their leaves each aligned. */
int64_t memplan_value_bytes(const Shape *s);
/* Whether fusion/elementwise instruction `user` reads its operand `opnd` only at the index
 * it writes (so it may overwrite that operand in place). */
bool memplan_reads_elementwise(const HInstr *user, int opnd);
/* Write the plan as text: one line per instruction with storage (name, opcode, kind,
 * offset, size, live range), then TEMP_BYTES, the peak-live lower bound and the
 * fragmentation (TEMP_BYTES over the bound, in percent). c is the computation planned. */
void memplan_dump(const MemPlan *p, const HComp *c, FILE *f);

/* ------------------------------------------------------------------ schedule.c */

/* Reorder c (a valid dependency order) to lower its scratch need: the current order, a
 * greedy list schedule and a DFS post-order are each planned with memplan_assign and the
 * smallest TEMP_BYTES wins. Scratch from a. Returns whether the order changed; *temp_bytes
 * (if not NULL) gets the winner's TEMP_BYTES. */
bool memplan_schedule(HComp *c, HArena *a, int64_t *temp_bytes);

#endif
