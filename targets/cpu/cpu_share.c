/* targets/cpu/cpu_share.c: kernels merged before optimization, cpu_share_kernels(), called by
 * the driver (cpu_compile.c) once every kernel is built.
 *
 * Kernels reach all memory through their pointer table (cpu_kernel.c), so kernels that differ
 * only in the buffers they touch are one function. Two rounds, each comparing the task
 * functions in task order by their fingerprint (below):
 *   - exact: IR equal up to names (repeated layers of one shape): the later function is
 *     deleted and its tasks run the earlier one;
 *   - up to integer constants (at -O0..-O2; -O3 keeps every kernel specialized): IR equal
 *     but for some i32/i64 constants in positions where LLVM takes any value (cp_hole_kind:
 *     the same layer at another size: loop bounds, strides, offsets, the GEMM's dimensions).
 *     The first function of a group keeps them as constants where every member has the same
 *     value; each differing one becomes a load, at the top of the entry block, from a table
 *     of int64s in read-only data (NAME_kpT, one per member) that the run function passes to
 *     the member's tasks as one more slot. A signed divisor that differs becomes four table
 *     entries, its magic numbers (cpu_sdiv_magic, the multiply-high LLVM makes of a constant
 *     divisor), so index arithmetic costs a multiplication, not a division instruction.
 * On resnet18 the second round takes its 32 kernel functions to 17 (the four stages repeat
 * one block at four sizes), about a sixth of its compile time; the generated code ran as
 * fast (tools/bench drivers, the bench models, within noise).
 *
 * The fingerprint is gen_fingerprint (targets/gen/gen_fingerprint.c); the holes are this
 * file's say over its operands (cp_hole).
 */
#include "cpu_impl.h"

#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ holes */

/* Parametric sharing (below) looks at the integer constants of an instruction an operand at a
 * time: CP_EXACT ones are part of the fingerprint, the others (holes) only by their kind and
 * width, and are recorded as sites so that a merged function can read them at run time. */
enum { CP_EXACT, CP_HOLE_PLAIN, CP_HOLE_DIV };

typedef struct CpSite {
  LLVMValueRef in; /* the instruction */
  int op;          /* its operand number */
  int64_t v;       /* the constant, sign-extended */
  int kind;        /* CP_HOLE_PLAIN: any value; CP_HOLE_DIV: a signed divisor >= 1 */
  unsigned bits;   /* its width: 32 or 64 */
} CpSite;

typedef struct CpHoles {
  CpSite *s;     /* sites in fingerprint order */
  size_t n, cap; /* count and capacity */
} CpHoles;

static void cp_site_add(CpHoles *h, CpSite s) {
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 64;
    h->s = realloc(h->s, h->cap * sizeof *h->s);
    HLO_ASSERT(h->s);
  }
  h->s[h->n++] = s;
}

/* Whether operand k (value v) of instruction in may become a value read at run time. Only i32
 * and i64 constants, and only where LLVM takes any value: arithmetic, comparisons, selected
 * and stored values, phi inputs, the index of a one-index GEP into a non-struct type (not
 * into the slot table: which slot a kernel reads stays fixed), the arguments of a call to a
 * function of the module (never an intrinsic: their immediates must stay constants). A
 * signed divisor is a hole of its own kind (division by a run-time divisor is strength
 * reduced by the merge); unsigned divisors, shuffle lanes, alloca sizes, switch cases and the
 * rest stay exact. */
static int cp_hole_kind(LLVMValueRef in, LLVMOpcode op, int k, LLVMValueRef v) {
  if (!v || !LLVMIsAConstantInt(v)) return CP_EXACT;
  unsigned bits = LLVMGetIntTypeWidth(LLVMTypeOf(v));
  if (bits != 32 && bits != 64) return CP_EXACT;
  if (op == LLVMAdd || op == LLVMSub || op == LLVMMul || op == LLVMAnd || op == LLVMOr ||
      op == LLVMXor || op == LLVMShl || op == LLVMLShr || op == LLVMAShr || op == LLVMICmp ||
      op == LLVMPHI)
    return CP_HOLE_PLAIN;
  if (op == LLVMSelect) return k >= 1 ? CP_HOLE_PLAIN : CP_EXACT;
  if (op == LLVMStore) return k == 0 ? CP_HOLE_PLAIN : CP_EXACT;
  if (op == LLVMSDiv || op == LLVMSRem) {
    if (k == 0) return CP_HOLE_PLAIN;
    return bits == 64 && LLVMConstIntGetSExtValue(v) >= 1 ? CP_HOLE_DIV : CP_EXACT;
  }
  if (op == LLVMUDiv || op == LLVMURem) return k == 0 ? CP_HOLE_PLAIN : CP_EXACT;
  if (op == LLVMGetElementPtr) {
    if (k != 1 || LLVMGetNumOperands(in) != 2 || LLVMIsAArgument(LLVMGetOperand(in, 0)))
      return CP_EXACT;
    return LLVMGetTypeKind(LLVMGetGEPSourceElementType(in)) == LLVMStructTypeKind ? CP_EXACT
                                                                                  : CP_HOLE_PLAIN;
  }
  if (op == LLVMCall) {
    LLVMValueRef callee = LLVMGetCalledValue(in);
    if (k >= (int)LLVMGetNumArgOperands(in) || !LLVMIsAFunction(callee) ||
        LLVMGetIntrinsicID(callee))
      return CP_EXACT;
    return CP_HOLE_PLAIN;
  }
  return CP_EXACT;
}

/* Operand k (value v) of instruction i as the second round sees it: a hole (cp_hole_kind) is a
 * token of its kind and width, its site recorded in the CpHoles ctx; false for the rest. */
static bool cp_hole(void *ctx, GenFp *f, LLVMValueRef i, int k, LLVMValueRef v) {
  CpHoles *h = ctx;
  int hk = cp_hole_kind(i, LLVMGetInstructionOpcode(i), k, v);
  if (hk == CP_EXACT) return false;
  unsigned bits = LLVMGetIntTypeWidth(LLVMTypeOf(v));
  gen_fp_tok(f, ((uint64_t)(hk * 128 + (int)bits) << 3) | 2);
  cp_site_add(h, (CpSite){i, k, LLVMConstIntGetSExtValue(v), hk, bits});
  return true;
}

/* fn's fingerprint; with h, its holes are left open and recorded in h. */
static void cp_fingerprint(LLVMValueRef fn, GenFp *f, CpHoles *h) {
  if (h) h->n = 0;
  gen_fingerprint(fn, f, h ? cp_hole : NULL, h);
}

/* ------------------------------------------------------------------ merging */

void cpu_sdiv_magic(int64_t d, int64_t mv[4]) {
  if (d == 1) { /* q = n: no product, all of n added, no rounding step */
    mv[0] = 0, mv[1] = 0, mv[2] = -1, mv[3] = 0;
    return;
  }
  /* the smallest p >= 64 with 2^p > nc * (d - 2^p mod d), nc the largest n with n mod d ==
     d - 1; M = 2^p / d + 1 (Granlund and Montgomery; Hacker's Delight 10-1) */
  const uint64_t two63 = 1ull << 63, ad = (uint64_t)d;
  uint64_t anc = two63 - 1 - (two63 - 1) % ad; /* nc */
  int p = 63;
  uint64_t q1 = two63 / anc, r1 = two63 - q1 * anc;
  uint64_t q2 = two63 / ad, r2 = two63 - q2 * ad, delta;
  do {
    p++;
    q1 *= 2, r1 *= 2;
    if (r1 >= anc) q1++, r1 -= anc;
    q2 *= 2, r2 *= 2;
    if (r2 >= ad) q2++, r2 -= ad;
    delta = ad - r2;
  } while (q1 < delta || (q1 == delta && r1 == 0));
  mv[0] = (int64_t)(q2 + 1);
  mv[1] = p - 64;
  mv[2] = mv[0] < 0 ? -1 : 0; /* M over 2^63: the product's high half lacks one n */
  mv[3] = -1;                 /* truncation toward zero: +1 for a negative n */
}

int64_t cpu_sdiv_by_magic(int64_t n, const int64_t mv[4]) {
  __int128 prod = (__int128)n * (__int128)mv[0];
  uint64_t t = (uint64_t)(int64_t)(prod >> 64) + ((uint64_t)n & (uint64_t)mv[2]);
  int64_t q = (int64_t)t >> mv[1];
  return (int64_t)((uint64_t)q + (((uint64_t)n >> 63) & (uint64_t)mv[3]));
}

/* One run-time value of a merged function: a hole whose constant differs between the
 * members, identified by its kind, width and the members' constants (sites with the same
 * ones share it). A divisor takes CP_DIV_VALUES table entries: itself and its magic numbers. */
enum { CP_DIV_VALUES = 5 };
typedef struct CpParam {
  int kind;                        /* CP_HOLE_PLAIN or CP_HOLE_DIV */
  unsigned bits;                   /* 32 or 64 */
  int at;                          /* its first entry in the members' tables */
  int64_t *v;                      /* each member's constant */
  LLVMValueRef val[CP_DIV_VALUES]; /* in the merged function: the value (CP_HOLE_PLAIN), or the
                          divisor and its four magic entries (CP_HOLE_DIV) */
} CpParam;

/* Merge the functions of tasks mt[0..m-1] (fingerprints equal with holes hs[mt[i]]) into the
 * first one: each differing constant becomes a load from a per-member table of int64s in
 * read-only data (NAME_kpT), which the tasks receive as one more slot; a division by a
 * differing divisor becomes a multiply-high by the divisor's magic number (cpu_sdiv_magic,
 * computed here per member), as LLVM would have made of a constant divisor. */
static void cp_merge(CpuCg *cg, const int *mt, int m, const CpHoles *hs) {
  LLVMValueRef f0 = cg->tasks[mt[0]].fn;
  HArena *a = cg->g.scratch; /* zeroed, freed with the compilation's scratch */
  LLVMValueRef *mf = hlo_arena_alloc(a, (size_t)m * sizeof *mf);
  for (int i = 0; i < m; i++)
    mf[i] = cg->tasks[mt[i]].fn;
  const CpHoles *h0 = &hs[mt[0]];
  size_t L = h0->n;
  int *sp = hlo_arena_alloc(a, (L + 1) * sizeof *sp);
  CpParam *ps = hlo_arena_alloc(a, (L + 1) * sizeof *ps);
  int np = 0, nv = 0;
  for (size_t s = 0; s < L; s++) {
    const CpSite *st = &h0->s[s];
    bool same = true;
    for (int i = 1; i < m && same; i++)
      same = hs[mt[i]].s[s].v == st->v;
    sp[s] = -1;
    if (same) continue;
    for (int q = 0; q < np && sp[s] < 0; q++) {
      bool eq = ps[q].kind == st->kind && ps[q].bits == st->bits;
      for (int i = 0; i < m && eq; i++)
        eq = ps[q].v[i] == hs[mt[i]].s[s].v;
      if (eq) sp[s] = q;
    }
    if (sp[s] >= 0) continue;
    ps[np] =
        (CpParam){st->kind, st->bits, nv, hlo_arena_alloc(a, (size_t)m * sizeof(int64_t)), {0}};
    for (int i = 0; i < m; i++)
      ps[np].v[i] = hs[mt[i]].s[s].v;
    nv += st->kind == CP_HOLE_DIV ? CP_DIV_VALUES : 1;
    sp[s] = np++;
  }
  /* the slot of the table: after every slot any member's task has */
  int pslot = 0;
  for (int t = 0; t < cg->ntasks; t++)
    for (int i = 0; i < m; i++)
      if (cg->tasks[t].fn == mf[i] && cg->tasks[t].nslots > pslot) pslot = cg->tasks[t].nslots;
  LLVMBuilderRef B = cg->g.B;
  if (nv > 0) {
    /* the values, read once at the top of the entry block */
    LLVMPositionBuilderBefore(B, LLVMGetFirstInstruction(LLVMGetEntryBasicBlock(f0)));
    LLVMValueRef ix = LLVMConstInt(cg->g.i64, (unsigned long long)pslot, 0);
    LLVMValueRef tab = LLVMBuildLoad2(
        B, cg->g.ptr, LLVMBuildInBoundsGEP2(B, cg->g.ptr, LLVMGetParam(f0, 0), &ix, 1, ""),
        "kparams");
    for (int q = 0; q < np; q++)
      for (int j = 0; j < (ps[q].kind == CP_HOLE_DIV ? CP_DIV_VALUES : 1); j++) {
        ix = LLVMConstInt(cg->g.i64, (unsigned long long)(ps[q].at + j), 0);
        LLVMValueRef v = LLVMBuildLoad2(
            B, cg->g.i64, LLVMBuildInBoundsGEP2(B, cg->g.i64, tab, &ix, 1, ""), "kparam");
        ps[q].val[j] = ps[q].bits == 32 ? LLVMBuildTrunc(B, v, cg->g.i32, "") : v;
      }
    /* plain holes first: a divisor's instruction may have one in its dividend */
    for (size_t s = 0; s < L; s++)
      if (sp[s] >= 0 && h0->s[s].kind == CP_HOLE_PLAIN)
        LLVMSetOperand(h0->s[s].in, (unsigned)h0->s[s].op, ps[sp[s]].val[0]);
    LLVMTypeRef i128 = LLVMInt128TypeInContext(cg->g.C);
    for (size_t s = 0; s < L; s++) {
      if (sp[s] < 0 || h0->s[s].kind != CP_HOLE_DIV) continue;
      LLVMValueRef in = h0->s[s].in, *pv = ps[sp[s]].val;
      LLVMPositionBuilderBefore(B, in);
      LLVMValueRef n = LLVMGetOperand(in, 0);
      LLVMValueRef prod =
          LLVMBuildMul(B, LLVMBuildSExt(B, n, i128, ""), LLVMBuildSExt(B, pv[1], i128, ""), "");
      LLVMValueRef t =
          LLVMBuildTrunc(B, LLVMBuildAShr(B, prod, LLVMConstInt(i128, 64, 0), ""), cg->g.i64, "");
      t = LLVMBuildAdd(B, t, LLVMBuildAnd(B, n, pv[3], ""), "");
      t = LLVMBuildAShr(B, t, pv[2], "");
      LLVMValueRef sign = LLVMBuildLShr(B, n, LLVMConstInt(cg->g.i64, 63, 0), "");
      LLVMValueRef q = LLVMBuildAdd(B, t, LLVMBuildAnd(B, sign, pv[4], ""), "");
      if (LLVMGetInstructionOpcode(in) == LLVMSRem)
        q = LLVMBuildSub(B, n, LLVMBuildMul(B, q, pv[0], ""), "");
      LLVMReplaceAllUsesWith(in, q);
      LLVMInstructionEraseFromParent(in);
    }
  }
  /* every member's table, and its tasks moved to f0 with the table's slot */
  int64_t *vals = hlo_arena_alloc(a, ((size_t)nv + 1) * sizeof *vals);
  LLVMValueRef *cv = hlo_arena_alloc(a, ((size_t)nv + 1) * sizeof *cv);
  for (int i = 0; i < m; i++) {
    LLVMValueRef gv = NULL;
    if (nv > 0) {
      for (int q = 0; q < np; q++) {
        vals[ps[q].at] = ps[q].v[i];
        if (ps[q].kind == CP_HOLE_DIV) cpu_sdiv_magic(ps[q].v[i], &vals[ps[q].at + 1]);
      }
      for (int j = 0; j < nv; j++)
        cv[j] = LLVMConstInt(cg->g.i64, (unsigned long long)vals[j], 1);
      LLVMValueRef init = LLVMConstArray2(cg->g.i64, cv, (uint64_t)nv);
      char name[300];
      snprintf(name, sizeof name, "%s_kp%d", cg->o->name, mt[i]);
      gv = LLVMAddGlobal(cg->g.M, LLVMTypeOf(init), name);
      LLVMSetInitializer(gv, init);
      LLVMSetGlobalConstant(gv, 1);
      LLVMSetLinkage(gv, LLVMPrivateLinkage);
      LLVMSetUnnamedAddress(gv, LLVMGlobalUnnamedAddr);
      LLVMSetAlignment(gv, 8);
    }
    for (int t = 0; t < cg->ntasks; t++) {
      CpuTask *task = &cg->tasks[t];
      if (task->fn != mf[i]) continue;
      task->fn = f0;
      if (!gv) continue;
      CpuSlot *ns = hlo_arena_alloc(cg->g.scratch, sizeof *ns * (size_t)(pslot + 1));
      for (int j = 0; j <= pslot; j++)
        ns[j] = j < task->nslots ? task->slots[j] : (CpuSlot){CPU_SLOT_GLOBAL, NULL, gv, 0};
      task->slots = ns;
      task->nslots = pslot + 1;
    }
    if (i > 0) LLVMDeleteFunction(mf[i]);
  }
}

/* One round of sharing over the tasks' functions: exact (param false), or up to integer
 * constants. Functions are compared in task order; a group is led by its first function. */
static void cp_share_round(CpuCg *cg, bool param) {
  int n = cg->ntasks;
  size_t un = (size_t)n;
  HArena *a = cg->g.scratch;
  GenFp *fp = hlo_arena_alloc(a, un * sizeof *fp); /* per task whose function is first seen there */
  CpHoles *hs = hlo_arena_alloc(a, un * sizeof *hs);
  uint64_t *hash = hlo_arena_alloc(a, un * sizeof *hash);
  bool *have = hlo_arena_alloc(a, un * sizeof *have);
  int *lead = hlo_arena_alloc(a, un * sizeof *lead);
  LLVMValueRef *orig = hlo_arena_alloc(a, un * sizeof *orig);
  for (int t = 0; t < n; t++)
    orig[t] = cg->tasks[t].fn;
  bool any = false;
  for (int t = 0; t < n; t++) {
    LLVMValueRef fn = orig[t];
    lead[t] = -1;
    if (!fn) continue; /* a control task */
    bool seen = false;
    for (int u = 0; u < t && !seen; u++)
      seen = orig[u] == fn;
    if (seen) continue; /* another task of a function met already */
    cp_fingerprint(fn, &fp[t], param ? &hs[t] : NULL);
    if (fp[t].opaque) continue;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < fp[t].n; i++)
      h = (h ^ fp[t].t[i]) * 1099511628211ull;
    int same = -1;
    for (int u = 0; u < t && same < 0; u++)
      if (have[u] && hash[u] == h && fp[u].n == fp[t].n &&
          memcmp(fp[u].t, fp[t].t, fp[t].n * sizeof *fp[t].t) == 0)
        same = u;
    if (same < 0) {
      have[t] = true;
      hash[t] = h;
      continue;
    }
    if (param) {
      lead[t] = same;
      any = true;
      continue;
    }
    for (int v = t; v < n; v++)
      if (orig[v] == fn) cg->tasks[v].fn = orig[same];
    LLVMDeleteFunction(fn);
  }
  if (any) {
    int *mt = hlo_arena_alloc(a, un * sizeof *mt);
    for (int t = 0; t < n; t++) {
      if (!have[t]) continue;
      int m = 0;
      mt[m++] = t;
      for (int u = t + 1; u < n; u++)
        if (lead[u] == t) mt[m++] = u;
      if (m > 1) cp_merge(cg, mt, m, hs);
    }
  }
  for (int t = 0; t < n; t++) { /* the token buffers grow by realloc */
    free(fp[t].t);
    free(hs[t].s);
  }
}

void cpu_share_kernels(CpuCg *cg) {
  if (cg->ntasks < 2) return;
  cp_share_round(cg, false);
  const char *e = cpu_knob(cg, CPU_KNOB_SHARE); /* "exact": no merging up to constants */
  if (cg->o->opt_level <= 2 && !(e && strcmp(e, "exact") == 0)) cp_share_round(cg, true);
}
