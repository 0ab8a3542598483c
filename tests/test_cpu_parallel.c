/* tests/test_cpu_parallel.c: the CPU target's parallel emission (targets/cpu/cpu_emit.c).
 *
 * Objects of larger modules are optimized and code-generated in parts on several threads and
 * joined into one object; HLOC_CPU_SPLIT=1 forces that path for any module of two or more
 * kernel functions and HLOC_CPU_SPLIT=0 forces the serial one (Criterion runs every test in
 * its own process, so setting the variable affects that test only). Checked here: corpus
 * fixtures compiled both ways give XLA's results through tests/cpu_driver.c (serially and
 * with a 2-thread parallel-for), also in five parts, byte-identical whether one thread or
 * several compile them; the split object is byte-identical from run to run; the
 * join leaves no undefined reference to a function or global of the module itself and keeps
 * the interface symbols the only global ones; IR and assembly output still work with the
 * split on (they are emitted serially), and so do object formats the join does not read. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cpu/cpu_test_util.h"
#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#include "target.h"

/* Load fixture name, run the optimizer (fusions, so GEMM kernels and output fusions reach the
 * code generator) and compile it to DIR/model.o + model.h, the split forced on or off. */
static void tp_compile_fixture(const char *name, const char *dir, bool split, const char *obj) {
  char path[1024], hdr[600];
  snprintf(path, sizeof path, HLOC_CORPUS_DIR "/fixtures/%s/module.pb", name);
  snprintf(hdr, sizeof hdr, "%s/model.h", dir);
  HErr err = {0};
  HModule *m = proto_load_file(path, &err);
  cr_assert(m, "%s", err.msg);
  OptOpts oo = {0};
  cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
  ct_knob(CPU_KNOB_SPLIT, split ? "1" : "0");
  CpuOpts o = {.knobs = &ct_knobs,
               .name = "model",
               .out_path = obj,
               .header_path = hdr,
               .opt_level = 2,
               .emit = CPU_EMIT_OBJ,
               .par_min_elems = 1};
  cr_assert(cpu_compile(m, &o, &err), "%s: %s", name, err.msg);
  ct_knob(CPU_KNOB_SPLIT, NULL);
  hlo_module_free(m);
}

/* Build tests/cpu_driver.c against DIR/model.{o,h} and run it on the fixture's inputs and
 * XLA's outputs, serially and with two threads. */
static void tp_check_results(const char *name, const char *dir, double rtol, const char *what) {
  char datadir[600], label[300];
  snprintf(datadir, sizeof datadir, HLOC_CORPUS_DIR "/fixtures/%s", name);
  snprintf(label, sizeof label, "%s %s", name, what);
  ct_build_driver(dir);
  ct_check_driver(dir, datadir, rtol, "cpu_parallel", label);
}

static void tp_fixture_both_ways(const char *name, double rtol) {
  for (int split = 1; split >= 0; split--) {
    char *dir = ct_tmpdir("hloc_cpupar");
    char obj[600];
    snprintf(obj, sizeof obj, "%s/model.o", dir);
    tp_compile_fixture(name, dir, split, obj);
    tp_check_results(name, dir, rtol, split ? "split in two parts" : "serial");
    ct_rmdir(dir);
    free(dir);
  }
}

Test(cpu_parallel, split_and_serial_mlp, .timeout = 300) { tp_fixture_both_ways("mlp", 1e-4); }
Test(cpu_parallel, split_and_serial_transformer_layer, .timeout = 300) {
  tp_fixture_both_ways("transformer_layer", 1e-4);
}
Test(cpu_parallel, split_and_serial_resnet_block, .timeout = 300) {
  tp_fixture_both_ways("resnet_block", 1e-4);
}
/* Large constants (a frozen weight, packed at compile time, and a literal): they stay out of
 * the bitcode the other parts read, part 0 keeps them; split and serial objects compute the
 * interpreter's results. */
Test(cpu_parallel, split_with_large_constants, .timeout = 300) {
  static const char text[] =
      "HloModule big\n"
      "ENTRY e {\n"
      "  x = f32[8,256] parameter(0)\n"
      "  w = f32[256,256] parameter(1)\n"
      "  d = f32[8,256] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  t = f32[8,256] tanh(d)\n"
      "  io = s32[8,256,32] iota(), iota_dimension=2\n"
      "  c = f32[8,256,32] convert(io)\n"
      "  tb = f32[8,256,32] broadcast(t), dimensions={0,1}\n"
      "  ROOT r = f32[8,256,32] multiply(tb, c)\n"
      "}\n";
  for (int split = 1; split >= 0; split--) {
    HModule *m = ct_parse(text);
    HArena *a = hlo_arena_new();
    HErr err = {0};
    hlo_comp_renumber(m->entry);
    Literal *wv = ct_arg(a, &m->entry->params[1]->shape, 1, 0); /* 256 KiB */
    cr_assert(opt_freeze(m, 1, wv, &err), "%s", err.msg);
    OptOpts oo = {0};
    cr_assert(opt_optimize(m, &oo, &err), "optimizer: %s", err.msg);
    char *dir = ct_tmpdir("hloc_cpupar");
    Literal *x = ct_arg(a, &m->entry->params[0]->shape, 0, 0);
    char path[600], obj[600], hdr[600];
    snprintf(path, sizeof path, "%s/in0.npy", dir);
    cr_assert(hlo_npy_write(path, x, &err), "%s", err.msg);
    Literal *res = hlo_interp_run(m, a, &x, 1, &err);
    cr_assert(res, "interpreter: %s", err.msg);
    ct_write_leaves(dir, res, 0);
    snprintf(obj, sizeof obj, "%s/model.o", dir);
    snprintf(hdr, sizeof hdr, "%s/model.h", dir);
    ct_knob(CPU_KNOB_SPLIT, split ? "1" : "0");
    CpuOpts o = {.knobs = &ct_knobs,
                 .name = "model",
                 .out_path = obj,
                 .header_path = hdr,
                 .opt_level = 2,
                 .emit = CPU_EMIT_OBJ,
                 .par_min_elems = 1};
    cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
    ct_knob(CPU_KNOB_SPLIT, NULL);
    ct_build_driver(dir);
    ct_check_driver(dir, dir, 1e-5, "cpu_parallel",
                    split ? "large constants, split" : "large constants, serial");
    ct_rmdir(dir);
    free(dir);
    hlo_arena_free(a);
    hlo_module_free(m);
  }
}

/* Several parts, compiled by one thread or by several: XLA's results, and the same bytes
 * whatever the number of threads (the partition depends on the module only). */
Test(cpu_parallel, parts_are_independent_of_threads, .timeout = 300) {
  char *dir = ct_tmpdir("hloc_cpupar");
  ct_knob(CPU_KNOB_PARTS, "5");
  const char *threads[] = {"1", "2", "5"};
  char *ref = NULL;
  size_t nref = 0;
  for (int t = 0; t < 3; t++) {
    char obj[600];
    snprintf(obj, sizeof obj, "%s/model.o", dir);
    ct_knob(CPU_KNOB_THREADS, threads[t]);
    tp_compile_fixture("transformer_layer", dir, true, obj);
    size_t n;
    char *b = ct_slurp(obj, &n);
    if (!ref) {
      ref = b;
      nref = n;
      tp_check_results("transformer_layer", dir, 1e-4, "split in five parts");
      continue;
    }
    cr_expect(n == nref && memcmp(ref, b, n) == 0, "objects compiled by 1 and %s threads differ",
              threads[t]);
    free(b);
  }
  ct_knob(CPU_KNOB_PARTS, NULL);
  ct_knob(CPU_KNOB_THREADS, NULL);
  free(ref);
  ct_rmdir(dir);
  free(dir);
}

Test(cpu_parallel, split_object_is_deterministic, .timeout = 300) {
  char *dir = ct_tmpdir("hloc_cpupar");
  char first[600], again[600];
  snprintf(first, sizeof first, "%s/model.o", dir);
  tp_compile_fixture("transformer_layer", dir, true, first);
  size_t n1;
  char *a = ct_slurp(first, &n1);
  for (int r = 0; r < 3; r++) {
    snprintf(again, sizeof again, "%s/again%d.o", dir, r);
    tp_compile_fixture("transformer_layer", dir, true, again);
    size_t n2;
    char *b = ct_slurp(again, &n2);
    cr_expect(n1 == n2 && memcmp(a, b, n1) == 0, "split objects of run 0 and run %d differ", r + 1);
    free(b);
  }
  free(a);
  ct_rmdir(dir);
  free(dir);
}

/* Every symbol line of `nm` on obj into lines (malloc'd text). */
static char *tp_nm(const char *obj) {
  char cmd[700];
  snprintf(cmd, sizeof cmd, "nm '%s'", obj);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t got;
  while ((got = fread(buf + n, 1, cap - n - 1, p)) > 0) {
    n += got;
    if (n + 1 == cap) buf = realloc(buf, cap *= 2);
  }
  buf[n] = 0;
  cr_assert_eq(pclose(p), 0, "nm failed");
  return buf;
}

Test(cpu_parallel, join_resolves_own_symbols, .timeout = 300) {
  const char *fixtures[] = {"mlp", "resnet_block", "bert_base"};
  for (size_t f = 0; f < sizeof fixtures / sizeof *fixtures; f++) {
    char *dir = ct_tmpdir("hloc_cpupar");
    char obj[600];
    snprintf(obj, sizeof obj, "%s/model.o", dir);
    tp_compile_fixture(fixtures[f], dir, true, obj);
    char *syms = tp_nm(obj);
    int nglobal = 0, nlocal_fn = 0, nundef = 0;
    for (char *line = strtok(syms, "\n"); line; line = strtok(NULL, "\n")) {
      /* "ADDR T name" or "         U name" */
      char f1[512], f2[512], f3[512], kind;
      const char *name;
      int nf = sscanf(line, "%511s %511s %511s", f1, f2, f3);
      if (nf == 3)
        kind = f2[0], name = f3;
      else if (nf == 2)
        kind = f1[0], name = f2;
      else
        continue;
      nundef += kind == 'U';
      if (kind == 'U') {
        cr_expect(strncmp(name, "model_", 6) != 0, "%s: undefined reference to own symbol %s",
                  fixtures[f], name);
        continue;
      }
      if (kind >= 'A' && kind <= 'Z') {
        nglobal++;
        cr_expect(!strcmp(name, "model_run") || !strcmp(name, "model_run_mt") ||
                      !strcmp(name, "model_pack") || !strcmp(name, "model_run_packed") ||
                      !strcmp(name, "model_run_packed_mt") || !strcmp(name, "model_arg_info") ||
                      !strcmp(name, "model_result_info"),
                  "%s: unexpected global symbol %s (%c)", fixtures[f], name, kind);
      } else if (kind == 't' && !strncmp(name, "model_", 6)) {
        nlocal_fn++;
      }
    }
    cr_expect_eq(nglobal, 7, "%s: %d global symbols, want the 7 of the interface", fixtures[f],
                 nglobal);
    cr_expect(nlocal_fn >= 2, "%s: kernels should be local functions (%d found)", fixtures[f],
              nlocal_fn);
    fprintf(stderr, "[cpu_parallel] %s: %d global, %d local model_ functions, %d undefined\n",
            fixtures[f], nglobal, nlocal_fn, nundef);
    free(syms);
    ct_rmdir(dir);
    free(dir);
  }
}

Test(cpu_parallel, ir_and_assembly_with_split_on, .timeout = 300) {
  char *dir = ct_tmpdir("hloc_cpupar");
  HErr err = {0};
  char path[600];
  HModule *m = proto_load_file(HLOC_CORPUS_DIR "/fixtures/mlp/module.pb", &err);
  cr_assert(m, "%s", err.msg);
  ct_knob(CPU_KNOB_SPLIT, "1");
  snprintf(path, sizeof path, "%s/m.s", dir);
  CpuOpts o = {
      .knobs = &ct_knobs, .name = "model", .out_path = path, .opt_level = 2, .emit = CPU_EMIT_ASM};
  cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
  size_t n;
  char *t = ct_slurp(path, &n);
  cr_expect(strstr(t, "model_run:") && strstr(t, "model_run_mt:"),
            "assembly lacks the run functions");
  cr_expect(!strstr(t, ".L.hloc"), "assembly output should be emitted serially");
  free(t);
  hlo_module_free(m);
  m = proto_load_file(HLOC_CORPUS_DIR "/fixtures/mlp/module.pb", &err);
  snprintf(path, sizeof path, "%s/m.ll", dir);
  o.out_path = path;
  o.emit = CPU_EMIT_LLVM;
  cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
  t = ct_slurp(path, &n);
  cr_expect(strstr(t, "define i32 @model_run_mt(") || strstr(t, "@model_run_mt("),
            "IR lacks model_run_mt");
  free(t);
  hlo_module_free(m);
  ct_knob(CPU_KNOB_SPLIT, NULL);
  ct_rmdir(dir);
  free(dir);
}

/* The join reads 64-bit little-endian ELF only: other object formats are compiled serially
 * even with the split forced. */
Test(cpu_parallel, non_elf_target_stays_serial, .timeout = 300) {
  char *dir = ct_tmpdir("hloc_cpupar");
  HErr err = {0};
  char path[600];
  snprintf(path, sizeof path, "%s/m.o", dir);
  HModule *m = proto_load_file(HLOC_CORPUS_DIR "/fixtures/mlp/module.pb", &err);
  cr_assert(m, "%s", err.msg);
  ct_knob(CPU_KNOB_SPLIT, "1");
  CpuOpts o = {.knobs = &ct_knobs,
               .name = "model",
               .out_path = path,
               .triple = "x86_64-apple-macosx10.15",
               .opt_level = 2,
               .emit = CPU_EMIT_OBJ};
  cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
  ct_knob(CPU_KNOB_SPLIT, NULL);
  size_t n;
  char *t = ct_slurp(path, &n);
  const unsigned char macho64[4] = {0xcf, 0xfa, 0xed, 0xfe};
  cr_expect(n > 4 && memcmp(t, macho64, 4) == 0, "expected a Mach-O object");
  free(t);
  hlo_module_free(m);
  ct_rmdir(dir);
  free(dir);
}

/* Chunks of the kernel function fn in the IR text ir: its task table entry ({ ptr @fn, i64 N,
 * ...}) or, in a module of one task, the parallel-for call (i64 N, ptr nonnull @fn); 0 when
 * neither is there (a kernel of one chunk is called directly). */
static long tp_chunks(const char *ir, const char *fn) {
  char key[128], key2[128];
  snprintf(key, sizeof key, "ptr @%s, i64 ", fn);
  snprintf(key2, sizeof key2, ", ptr nonnull @%s,", fn);
  size_t kl = strlen(key), k2 = strlen(key2), n = strlen(ir);
  for (size_t at = 0; at + kl <= n; at++)
    if (!memcmp(ir + at, key, kl)) return strtol(ir + at + kl, NULL, 10);
  for (size_t at = 0; at + k2 <= n; at++)
    if (!memcmp(ir + at, key2, k2)) {
      size_t b = at; /* back over the chunk count to its "i64 " */
      while (b > 0 && ir[b - 1] != ' ')
        b--;
      return strtol(ir + b, NULL, 10);
    }
  return 0;
}

/* A row reduction's kernel is split by the work it does (its operand's elements), not by its
 * result's: 64 sums of 1024 elements each are split into chunks at the default threshold
 * (32768 elements of work), 64 sums of 16 are not. */
Test(cpu_parallel, row_reduction_split_by_work, .timeout = 300) {
  static const char *const texts[2] = {
      "HloModule m\nadd { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, "
      "b) }\n"
      "ENTRY e {\n x = f32[64,1024] parameter(0)\n z = f32[] constant(0)\n"
      " ROOT r = f32[64] reduce(x, z), dimensions={1}, to_apply=add\n}\n",
      "HloModule m\nadd { a = f32[] parameter(0)\n b = f32[] parameter(1)\n ROOT s = f32[] add(a, "
      "b) }\n"
      "ENTRY e {\n x = f32[64,16] parameter(0)\n z = f32[] constant(0)\n"
      " ROOT r = f32[64] reduce(x, z), dimensions={1}, to_apply=add\n}\n"};
  for (int i = 0; i < 2; i++) {
    char *dir = ct_tmpdir("hloc_cpupar");
    char path[600];
    snprintf(path, sizeof path, "%s/m.ll", dir);
    HModule *m = ct_parse(texts[i]);
    HErr err = {0};
    CpuOpts o = {.knobs = &ct_knobs,
                 .name = "model",
                 .out_path = path,
                 .opt_level = 2,
                 .emit = CPU_EMIT_LLVM};
    cr_assert(cpu_compile(m, &o, &err), "%s", err.msg);
    size_t n;
    char *ir = ct_slurp(path, &n);
    long c = tp_chunks(ir, "model_k0");
    if (i == 0)
      cr_expect_gt(c, 1, "64 x 1024 row sums in %ld chunk(s)", c);
    else
      cr_expect_leq(c, 1, "64 x 16 row sums in %ld chunks",
                    c); /* one chunk: called directly, no task entry */
    free(ir);
    hlo_module_free(m);
    ct_rmdir(dir);
    free(dir);
  }
}
