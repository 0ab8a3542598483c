/* tests/test_tools.c: the command-line tools end to end: bad input gives one located line and
 * exit code 1, hloc-run reproduces XLA's outputs, --emit=hlo prints text that reads back. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hlo.h"
#include "proto.h"
#include "target.h"

typedef struct Run {
  int rc;          /* exit status */
  char out[16384]; /* stdout */
  char err[16384]; /* stderr */
} Run;

static void slurp(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "rb");
  size_t k = f ? fread(buf, 1, n - 1, f) : 0;
  buf[k] = 0;
  if (f) fclose(f);
}

static Run *run(const char *fmt, ...) {
  static Run r;
  char cmd[8192], args[6000];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(args, sizeof args, fmt, ap);
  va_end(ap);
  char o[] = "/tmp/hloc_out_XXXXXX", e[] = "/tmp/hloc_err_XXXXXX";
  close(mkstemp(o));
  close(mkstemp(e));
  snprintf(cmd, sizeof cmd, "%s >%s 2>%s", args, o, e);
  int st = system(cmd);
  r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  slurp(o, r.out, sizeof r.out);
  slurp(e, r.err, sizeof r.err);
  unlink(o);
  unlink(e);
  return &r;
}

static int lines(const char *s) {
  int n = 0;
  for (; *s; s++)
    n += *s == '\n';
  return n;
}

static void write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  cr_assert(f);
  fwrite(data, 1, n, f);
  fclose(f);
}

#define HLOC HLOC_BIN_DIR "/hloc"
#define HLOC_RUN HLOC_BIN_DIR "/hloc-run"

Test(tools, verifies_a_fixture) {
  Run *r = run(HLOC " " HLOC_CORPUS_DIR "/fixtures/mlp/module.pb");
  cr_expect_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->out, "verified"), "%s", r->out);
}

Test(tools, bad_inputs_one_line_exit_1) {
  char dir[] = "/tmp/hloc_bad_XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[512];
  /* garbage bytes */
  snprintf(path, sizeof path, "%s/garbage.pb", dir);
  unsigned char junk[4096];
  unsigned x = 12345;
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (unsigned char)((x = x * 1103515245 + 12345) >> 16);
  write_file(path, junk, sizeof junk);
  Run *r = run(HLOC " %s", path);
  cr_expect_eq(r->rc, 1, "garbage: rc %d", r->rc);
  cr_expect_eq(lines(r->err), 1, "garbage: %s", r->err);
  cr_expect(strstr(r->err, path), "garbage: %s", r->err);
  /* truncated proto */
  char *buf;
  size_t len;
  HErr err = {0};
  cr_assert(hlo_read_file(HLOC_CORPUS_DIR "/fixtures/mlp/module.pb", &buf, &len, &err));
  snprintf(path, sizeof path, "%s/truncated.pb", dir);
  write_file(path, buf, len / 2);
  free(buf);
  r = run(HLOC " %s", path);
  cr_expect_eq(r->rc, 1, "truncated: rc %d", r->rc);
  cr_expect_eq(lines(r->err), 1, "truncated: %s", r->err);
  /* unknown opcode in text */
  snprintf(path, sizeof path, "%s/unknown.hlo", dir);
  const char *txt = "HloModule m\n\nENTRY main {\n  p = f32[2]{0} parameter(0)\n"
                    "  ROOT q = f32[2]{0} frobnicate(p)\n}\n";
  write_file(path, txt, strlen(txt));
  r = run(HLOC " %s", path);
  cr_expect_eq(r->rc, 1);
  cr_expect_eq(lines(r->err), 1, "%s", r->err);
  cr_expect(strstr(r->err, "frobnicate"), "%s", r->err);
  /* shape mismatch: names the computation and the instruction */
  snprintf(path, sizeof path, "%s/mismatch.hlo", dir);
  txt = "HloModule m\n\nENTRY main {\n  p = f32[2]{0} parameter(0)\n"
        "  q = f32[3]{0} parameter(1)\n  ROOT s = f32[2]{0} add(p, q)\n}\n";
  write_file(path, txt, strlen(txt));
  r = run(HLOC " %s", path);
  cr_expect_eq(r->rc, 1);
  cr_expect_eq(lines(r->err), 1, "%s", r->err);
  cr_expect(strstr(r->err, "main") && strstr(r->err, "'s'"), "%s", r->err);
  /* missing file, unknown option */
  r = run(HLOC " %s/nope.pb", dir);
  cr_expect_eq(r->rc, 1);
  cr_expect_eq(lines(r->err), 1, "%s", r->err);
  r = run(HLOC " --bogus %s", path);
  cr_expect_eq(r->rc, 1);
  /* an option of the other target: one line naming it */
  r = run(HLOC " %s --gemm-prologues=fused", path);
  cr_expect_eq(r->rc, 1);
  cr_expect_eq(lines(r->err), 1, "%s", r->err);
  cr_expect(strstr(r->err, "--gemm-prologues is an option of the cuda target"), "%s", r->err);
  r = run(HLOC " %s --cuda-graphs=off", path);
  cr_expect_eq(r->rc, 1);
  cr_expect(strstr(r->err, "--cuda-graphs is an option of the cuda target"), "%s", r->err);
#ifdef HLOC_HAVE_CUDA
  r = run(HLOC " %s --target=cuda --cuda-graphs=sometimes -o %s/m.o", path, dir);
  cr_expect_eq(r->rc, 1);
  cr_expect(strstr(r->err, "--cuda-graphs must be auto or off"), "%s", r->err);
#endif
  run("rm -rf %s", dir);
}

/* --conv-algo: a 3x3 convolution of unit stride goes through Winograd by default (its slice
 * loop, "wino", in the IR), directly with --conv-algo=direct; another value is an error. */
Test(tools, conv_algo_option) {
  char dir[] = "/tmp/hloc_algo_XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[512], ll[600];
  static char buf[1 << 20];
  snprintf(path, sizeof path, "%s/c.hlo", dir);
  const char *txt = "HloModule m\nENTRY e {\n  x = f32[2,8,8,16] parameter(0)\n  w = "
                    "f32[3,3,16,16] parameter(1)\n"
                    "  ROOT c = f32[2,8,8,16] convolution(x, w), window={size=3x3 pad=1_1x1_1}, "
                    "dim_labels=b01f_01io->b01f\n}\n";
  write_file(path, txt, strlen(txt));
  snprintf(ll, sizeof ll, "%s/c.ll", dir);
  Run *r = run(HLOC " %s --emit=llvm -o %s", path, ll);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  slurp(ll, buf, sizeof buf);
  cr_expect(strstr(buf, "wino"), "default: no Winograd kernel");
  r = run(HLOC " %s --emit=llvm --conv-algo=direct -o %s", path, ll);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  slurp(ll, buf, sizeof buf);
  cr_expect(!strstr(buf, "wino"), "--conv-algo=direct: a Winograd kernel");
  r = run(HLOC " %s --conv-algo=fft -o %s", path, ll);
  cr_expect_eq(r->rc, 1);
  cr_expect_eq(lines(r->err), 1, "%s", r->err);
  run("rm -rf %s", dir);
}

/* --dot-algorithm=bf16x3 turns an f32 dot into its two bf16 products (--stats counts them, -o -
 * prints them); a value it does not know is one line and exit 1. */
Test(tools, dot_algorithm_option) {
  char dir[] = "/tmp/hloc_dalg_XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[512], obj[600];
  snprintf(path, sizeof path, "%s/d.hlo", dir);
  snprintf(obj, sizeof obj, "%s/d.o", dir);
  const char *txt = "HloModule m\nENTRY e {\n  a = f32[96,128] parameter(0)\n"
                    "  b = f32[128,80] parameter(1)\n  ROOT d = f32[96,80] dot(a, b), "
                    "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n";
  write_file(path, txt, strlen(txt));
  Run *r = run(HLOC " %s -o %s --stats", path, obj);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->err, "cpu: products 1:"), "%s", r->err);
  r = run(HLOC " %s -o %s --stats --dot-algorithm=bf16x3", path, obj);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->err, "cpu: products 2:") && strstr(r->err, "f32 0"), "%s", r->err);
  r = run(HLOC " %s -o - --emit=hlo-opt --dot-algorithm=bf16x3", path);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->out, "algorithm=dot_bf16_bf16_f32") && access("-", F_OK) != 0, "%s", r->out);
  r = run(HLOC " %s -o %s --dot-algorithm=tf64", path, obj);
  cr_expect_eq(r->rc, 1);
  cr_expect(strstr(r->err, "--dot-algorithm must be exact, bf16, bf16x3 or f16"), "%s", r->err);
}

/* An attention the optimizer fuses gets the CPU's blocked attention kernel (--stats), and keeps
 * its products and softmax as kernels of their own with the pass disabled. */
Test(tools, cpu_attention_kernel_in_stats) {
  const char *src = HLOC_TEST_DIR "/cpu/cases/attention_causal_f32.hlo";
  Run *r = run(HLOC " %s -o /tmp/hloc_att_stats.o --stats", src);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->err, "attention kernels 1 (blocked"), "%s", r->err);
  r = run(HLOC " %s -o /tmp/hloc_att_stats.o --stats --disable-pass=attention", src);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect(!strstr(r->err, "attention kernels") && strstr(r->err, "products 2"), "%s", r->err);
  remove("/tmp/hloc_att_stats.o");
  remove("/tmp/hloc_att_stats.h");
}

/* --stats on the CPU target says which kernel each product got: bf16 and s8 dots on AMX tiles
 * when compiled for Sapphire Rapids, widened to f32 without AMX-BF16 (AMX-INT8), and an f64
 * dot (which no GEMM path takes) named among the loop nests. */
Test(tools, cpu_stats_name_the_products_kernels) {
  char dir[] = "/tmp/hloc_pstats_XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[512], obj[600];
  snprintf(path, sizeof path, "%s/d.hlo", dir);
  snprintf(obj, sizeof obj, "%s/d.o", dir);
  const char *txt =
      "HloModule m\nENTRY e {\n  x = bf16[64,128] parameter(0)\n"
      "  y = bf16[128,64] parameter(1)\n  a = s8[64,128] parameter(2)\n"
      "  b = s8[128,64] parameter(3)\n  u = f64[64,128] parameter(4)\n"
      "  v = f64[128,64] parameter(5)\n"
      "  d = f32[64,64] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  q = s32[64,64] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  w = f64[64,64] dot(u, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  ROOT t = (f32[64,64], s32[64,64], f64[64,64]) tuple(d, q, w)\n}\n";
  write_file(path, txt, strlen(txt));
  Run *r = run(HLOC " %s -o %s --cpu sapphirerapids --stats", path, obj);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->err, "bf16 or s8 on AMX tiles 2") && strstr(r->err, "loop nests 1 (w)") &&
                strstr(r->err, "16-bit or s8 widened to f32 0"),
            "%s", r->err);
  r = run(HLOC " %s -o %s --cpu sapphirerapids --features=-amx-bf16 --stats", path, obj);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->err, "16-bit or s8 widened to f32 1") && strstr(r->err, "AMX tiles 1"), "%s",
            r->err);
  r = run(HLOC " %s -o %s --cpu sapphirerapids --features=-amx-bf16,-amx-int8,-avx512vnni --stats",
          path, obj);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->err, "16-bit or s8 widened to f32 2") && strstr(r->err, "AMX tiles 0"), "%s",
            r->err);
  run("rm -rf %s", dir);
}

/* --freeze takes a bf16 weight stored as its bits ('<u2', the corpus's and ml_dtypes' way) as
 * the parameter's bf16: llama_decode_bf16's norm scale (parameter 4) frozen from its .npy. */
Test(tools, freeze_takes_bf16_bits) {
  char dir[] = "/tmp/hloc_freeze16_XXXXXX";
  cr_assert(mkdtemp(dir));
  Run *r = run(HLOC " " HLOC_CORPUS_DIR
                    "/fixtures/llama_decode_bf16/module.pb --freeze 4=" HLOC_CORPUS_DIR
                    "/fixtures/llama_decode_bf16/in4.npy -o %s/m.o --stats",
               dir);
  cr_expect_eq(r->rc, 0, "%s", r->err);
  run("rm -rf %s", dir);
}

Test(tools, emit_hlo_reads_back) {
  char dir[] = "/tmp/hloc_emit_XXXXXX";
  cr_assert(mkdtemp(dir));
  Run *r = run(
      HLOC " " HLOC_CORPUS_DIR "/fixtures/transformer_layer/module.pb --emit=hlo -o %s/t.hlo", dir);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  r = run(HLOC " %s/t.hlo", dir);
  cr_expect_eq(r->rc, 0, "%s", r->err);
  run("rm -rf %s", dir);
}

Test(tools, hloc_run_matches_xla) {
  char dir[] = "/tmp/hloc_run_XXXXXX";
  cr_assert(mkdtemp(dir));
  const char *f = HLOC_CORPUS_DIR "/fixtures/mlp";
  Run *r = run(HLOC_RUN " %s/module.pb %s/in0.npy %s/in1.npy %s/in2.npy %s/in3.npy %s/in4.npy "
                        "%s/in5.npy %s/in6.npy -o %s --expect %s/out0.npy",
               f, f, f, f, f, f, f, f, dir, f);
  cr_expect_eq(r->rc, 0, "%s%s", r->out, r->err);
  cr_expect(strstr(r->out, "result 0: max abs err"), "%s", r->out);
  char p[600];
  snprintf(p, sizeof p, "%s/out0.npy", dir);
  cr_expect_eq(access(p, R_OK), 0, "no %s", p);
  /* a wrong expectation fails with exit 1 */
  r = run(HLOC_RUN " %s/module.pb %s/in0.npy %s/in1.npy %s/in2.npy %s/in3.npy %s/in4.npy "
                   "%s/in5.npy %s/in6.npy --rtol 0 --atol 0 --expect %s/in6.npy",
          f, f, f, f, f, f, f, f, f);
  cr_expect_eq(r->rc, 1, "%s%s", r->out, r->err);
  /* a missing argument is one located line */
  r = run(HLOC_RUN " %s/module.pb %s/in0.npy", f, f);
  cr_expect_eq(r->rc, 1);
  cr_expect_eq(lines(r->err), 1, "%s", r->err);
  /* an argument of the wrong shape */
  r = run(HLOC_RUN " %s/module.pb %s/in1.npy %s/in1.npy %s/in2.npy %s/in3.npy %s/in4.npy "
                   "%s/in5.npy %s/in6.npy",
          f, f, f, f, f, f, f, f);
  cr_expect_eq(r->rc, 1);
  cr_expect_eq(lines(r->err), 1, "%s", r->err);
  run("rm -rf %s", dir);
}

/* Constants a dump elided ({...}): refused by default with a line naming the option; filled by
 * --elided-constants=zero|random[:SEED], the same values in hloc and hloc-run for a seed (the
 * compiled object and the interpreter agree), others for another seed; --stats counts them. */
Test(tools, elided_constants_filled) {
  char dir[] = "/tmp/hloc_elided_XXXXXX";
  cr_assert(mkdtemp(dir));
  char p[600];
  snprintf(p, sizeof p, "%s/m.hlo", dir);
  const char *text =
      "HloModule m\nENTRY e {\n  x = f32[2,3] parameter(0)\n"
      "  w = f32[3,4] constant({...})\n  b = f32[4] constant({...})\n"
      "  d = f32[2,4] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
      "  bb = f32[2,4] broadcast(b), dimensions={1}\n"
      "  ROOT r = f32[2,4] add(d, bb)\n}\n";
  write_file(p, text, strlen(text));
  Run *r = run(HLOC " %s -o %s/m.o", p, dir);
  cr_expect_eq(r->rc, 1);
  cr_expect(lines(r->err) == 1 && strstr(r->err, "'w'") && strstr(r->err, "--elided-constants"),
            "%s", r->err);
  r = run(HLOC " %s -o %s/m.o --elided-constants=ones", p, dir);
  cr_expect(r->rc == 1 && lines(r->err) == 1, "%s", r->err);
  r = run(HLOC " %s -o %s/m.o --elided-constants=random:3 --stats", p, dir);
  cr_expect_eq(r->rc, 0, "%s", r->err);
  cr_expect(strstr(r->err, "elided constants filled: 2"), "%s", r->err);
  char seeds[3][16384];
  for (int i = 0; i < 3; i++) {
    r = run(HLOC " %s --emit=hlo --elided-constants=random:%d", p, i == 2 ? 4 : 3);
    cr_assert_eq(r->rc, 0, "%s", r->err);
    cr_expect(!strstr(r->out, "{...}"), "%s", r->out);
    snprintf(seeds[i], sizeof seeds[i], "%s", r->out);
  }
  cr_expect_str_eq(seeds[0], seeds[1]);
  cr_expect_str_neq(seeds[0], seeds[2]);
  r = run(HLOC " %s --emit=hlo --elided-constants=zero", p);
  cr_expect(r->rc == 0 && strstr(r->out, "constant({0, 0, 0, 0})"), "%s", r->out);
  /* hloc-run fills what the library fills for the seed */
  HArena *a = hlo_arena_new();
  HErr err = {0};
  int64_t dims[2] = {2, 3};
  Shape xs = hlo_shape_array(DT_F32, 2, dims);
  Literal *x = hlo_literal_new(a, &xs);
  for (int i = 0; i < 6; i++)
    hlo_literal_set_f64(x, i, 0.25 * i - 0.5);
  char xp[700], op[700];
  snprintf(xp, sizeof xp, "%s/x.npy", dir);
  snprintf(op, sizeof op, "%s/out0.npy", dir);
  cr_assert(hlo_npy_write(xp, x, &err), "%s", err.msg);
  r = run(HLOC_RUN " %s %s -o %s --elided-constants=random:3", p, xp, dir);
  cr_assert_eq(r->rc, 0, "%s%s", r->out, r->err);
  HModule *m = proto_load_file(p, &err);
  cr_assert(m && hlo_verify(m, &err), "%s", err.msg);
  HElided e;
  cr_assert(hlo_elided_parse("random:3", &e, &err), "%s", err.msg);
  cr_expect_eq(hlo_fill_elided(m, &e), 2);
  Literal *want = hlo_interp_run(m, a, &x, 1, &err), *got = hlo_npy_read(a, op, &err);
  cr_assert(want && got, "%s", err.msg);
  HCompare c;
  cr_assert(hlo_literal_compare(got, want, 0, 0, &c, &err), "%s", err.msg);
  cr_expect_eq(c.bad, 0);
  cr_expect_gt(hlo_literal_max_abs(want), 0);
  hlo_module_free(m);
  hlo_arena_free(a);
  run("rm -rf %s", dir);
}

/* --list-knobs prints the table of knobs (cpu_knobs.def) a line each under its heading; an
 * unknown HLOC_CPU_ variable is not in it. */
Test(tools, list_knobs) {
  Run *r = run(HLOC " --list-knobs");
  cr_assert_eq(r->rc, 0, "%s", r->err);
  cr_expect_eq(lines(r->out), CPU_KNOB_COUNT + 1, "%s", r->out);
  cr_expect(strstr(r->out, "HLOC_CPU_THREADS") && strstr(r->out, "HLOC_CPU_GEMM_BLOCKS"), "%s",
            r->out);
  cr_expect(!strstr(r->out, "HLOC_CPU_PIPELINE"), "a removed experiment is listed: %s", r->out);
}

/* A bf16 model: arguments as the corpus stores them ('<u2' bit patterns) and as ml_dtypes
 * writes them ('|V2'), results compared within the bf16 bar and written back as '<u2' bits
 * that read again as the same expectation. */
Test(tools, hloc_run_bf16) {
  char dir[] = "/tmp/hloc_run_XXXXXX";
  cr_assert(mkdtemp(dir));
  const char *f = HLOC_CORPUS_DIR "/fixtures/llama_decode_bf16";
  char args[4096] = "";
  for (int i = 0, k = 0; i < 13; i++)
    k += snprintf(args + k, sizeof args - (size_t)k, " %s/in%d.npy", f, i);
  Run *r = run(HLOC_RUN " %s/module.pb%s -o %s --expect %s/out0.npy %s/out1.npy %s/out2.npy", f,
               args, dir, f, f, f);
  cr_expect_eq(r->rc, 0, "%s%s", r->out, r->err);
  cr_expect(strstr(r->out, "result 2: max abs err"), "%s", r->out);
  /* the written results are bf16 bits ('<u2') and match the reference again */
  r = run("head -c 128 %s/out0.npy | grep -c \"'<u2'\"", dir);
  cr_expect_eq(r->rc, 0, "out0.npy is not written as <u2 bits");
  r = run(HLOC_RUN " %s/module.pb%s --expect %s/out0.npy %s/out1.npy %s/out2.npy", f, args, dir,
          dir, dir);
  cr_expect_eq(r->rc, 0, "%s%s", r->out, r->err);
  /* the first argument re-labelled '|V2' (ml_dtypes' bfloat16) runs the same */
  r = run("sed \"1s/'<u2'/'|V2'/\" %s/in0.npy > %s/v2.npy && grep -c \"'|V2'\" %s/v2.npy", f, dir,
          dir);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  char v2args[4096];
  snprintf(v2args, sizeof v2args, " %s/v2.npy%s", dir, strchr(args + 1, ' '));
  r = run(HLOC_RUN " %s/module.pb%s --expect %s/out0.npy %s/out1.npy %s/out2.npy", f, v2args, f, f,
          f);
  cr_expect_eq(r->rc, 0, "%s%s", r->out, r->err);
  /* the bar is the reference's largest magnitude: the layer's input is not its output */
  r = run(HLOC_RUN " %s/module.pb%s --expect %s/in0.npy %s/out1.npy %s/out2.npy", f, args, f, f, f);
  cr_expect(r->rc == 1 && strstr(r->out, "result 0:") && strstr(r->out, "FAIL"), "%s%s", r->out,
            r->err);
  run("rm -rf %s", dir);
}

/* hloc-run with fp8: a f8e4m3fn parameter read from ml_dtypes' '|V1' bytes, an f8e5m2 result
 * written as '|u1' bits that are the scalar conversion of the f32 values, and --expect of them
 * passes. */
Test(tools, hloc_run_fp8) {
  char dir[] = "/tmp/hloc_run_XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[512];
  snprintf(path, sizeof path, "%s/m.hlo", dir);
  const char *text = "HloModule m\nENTRY e {\n  x = f8e4m3fn[8] parameter(0)\n"
                     "  y = f8e4m3fn[8] add(x, x)\n  ROOT z = f8e5m2[8] convert(y)\n}\n";
  write_file(path, text, strlen(text));
  HArena *a = hlo_arena_new();
  HErr err = {0};
  int64_t n = 8;
  Shape s = hlo_shape_array(DT_F8E4M3FN, 1, &n);
  Literal *x = hlo_literal_new(a, &s);
  const float xs[8] = {0.5f, -1.5f, 3.25f, 200, 448, -0.0f, 0.001953125f, 13};
  for (int i = 0; i < 8; i++)
    ((uint8_t *)x->data)[i] = hlo_f32_to_f8e4m3fn(xs[i]);
  snprintf(path, sizeof path, "%s/in0.npy", dir);
  cr_assert(hlo_npy_write(path, x, &err), "%s", err.msg);
  Run *r = run("sed -i \"1s/'|u1'/'|V1'/\" %s && grep -c \"'|V1'\" %s", path, path);
  cr_assert_eq(r->rc, 0, "%s", r->err);
  r = run(HLOC_RUN " %s/m.hlo %s -o %s", dir, path, dir);
  cr_assert_eq(r->rc, 0, "%s%s", r->out, r->err);
  r = run("head -c 128 %s/out0.npy | grep -c \"'|u1'\"", dir);
  cr_expect_eq(r->rc, 0, "out0.npy is not written as |u1 bits");
  snprintf(path, sizeof path, "%s/out0.npy", dir);
  Literal *o = hlo_npy_read(a, path, &err);
  cr_assert(o, "%s", err.msg);
  cr_assert(hlo_literal_bits_as(o, DT_F8E5M2));
  for (int i = 0; i < 8; i++) {
    float y =
        hlo_f8e4m3fn_to_f32(hlo_f32_to_f8e4m3fn(2 * hlo_f8e4m3fn_to_f32(((uint8_t *)x->data)[i])));
    uint8_t want = hlo_f32_to_f8e5m2(y);
    cr_expect_eq(((uint8_t *)o->data)[i], want, "out[%d] = 0x%02x, want 0x%02x", i,
                 ((uint8_t *)o->data)[i], want);
  }
  r = run(HLOC_RUN " %s/m.hlo %s/in0.npy --expect %s/out0.npy", dir, dir, dir);
  cr_expect_eq(r->rc, 0, "%s%s", r->out, r->err);
  hlo_arena_free(a);
  run("rm -rf %s", dir);
}

/* hlo_write_file_atomic: a regular file is replaced through a temporary and a rename; a path
 * that is not a regular file (a FIFO here, /dev/null for users) is written in place and stays
 * what it was (a rename over /dev/null as root replaced the device with a file); a directory
 * is refused with a message. */
Test(tools, output_to_special_files) {
  char dir[] = "/tmp/hloc_io_XXXXXX";
  cr_assert(mkdtemp(dir));
  char path[512], got[64];
  HErr err = {0};
  snprintf(path, sizeof path, "%s/plain", dir);
  cr_assert(hlo_write_file_atomic(path, "abc", 3, &err), "%s", err.msg);
  slurp(path, got, sizeof got);
  cr_expect_str_eq(got, "abc");
  snprintf(path, sizeof path, "%s/fifo", dir);
  cr_assert_eq(mkfifo(path, 0600), 0);
  pid_t pid = fork();
  cr_assert(pid >= 0);
  if (pid == 0) { /* the reader: exit 0 when it got the bytes (killed after 10 s if not) */
    alarm(10);
    char b[16] = {0};
    FILE *f = fopen(path, "rb");
    size_t k = f ? fread(b, 1, sizeof b - 1, f) : 0;
    _exit(k == 5 && !memcmp(b, "hello", 5) ? 0 : 1);
  }
  cr_expect(hlo_write_file_atomic(path, "hello", 5, &err), "%s", err.msg);
  int st = 0;
  waitpid(pid, &st, 0);
  cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the FIFO's reader did not get the bytes");
  struct stat sb;
  cr_assert_eq(stat(path, &sb), 0);
  cr_expect(S_ISFIFO(sb.st_mode), "the FIFO was replaced by a file");
  cr_expect(!hlo_write_file_atomic(dir, "x", 1, &err) && strstr(err.msg, "directory"), "%s",
            err.msg);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  cr_expect_eq(system(cmd), 0);
}

/* hloc verify: a fixture on its own inputs and on random ones agrees after every pass (exit 0);
 * a missing file, a wrong argument count and an unknown option are one line each, exit 2. */
Test(tools, verify_bisects_the_passes) {
  const char *fx = HLOC_CORPUS_DIR "/fixtures/mlp";
  Run *r = run(HLOC " verify %s/module.pb %s/in0.npy %s/in1.npy %s/in2.npy %s/in3.npy %s/in4.npy "
                    "%s/in5.npy %s/in6.npy",
               fx, fx, fx, fx, fx, fx, fx, fx);
  cr_expect_eq(r->rc, 0, "%s%s", r->out, r->err);
  cr_expect(strstr(r->out, "every pass agrees") && strstr(r->out, "fusion"), "%s", r->out);
  r = run(HLOC " verify " HLOC_CORPUS_DIR "/fixtures/transformer_layer/module.pb --random-inputs=7 "
               "--rtol 1e-4");
  cr_expect_eq(r->rc, 0, "%s%s", r->out, r->err);
  cr_expect(strstr(r->out, "random arguments"), "%s", r->out);
  /* against XLA's outputs: the interpreter agrees; the JSON report lists the passes */
  r = run(HLOC " verify %s/module.pb %s/in0.npy %s/in1.npy %s/in2.npy %s/in3.npy %s/in4.npy "
               "%s/in5.npy %s/in6.npy --expect %s/out0.npy --json /tmp/hloc_verify_%d.json",
          fx, fx, fx, fx, fx, fx, fx, fx, fx, (int)getpid());
  cr_expect_eq(r->rc, 0, "%s%s", r->out, r->err);
  cr_expect(strstr(r->out, "interpreter against the expected outputs: agrees"), "%s", r->out);
  char path[64], js[16384];
  snprintf(path, sizeof path, "/tmp/hloc_verify_%d.json", (int)getpid());
  slurp(path, js, sizeof js);
  unlink(path);
  cr_expect(strstr(js, "\"interpreter_vs_expected\": {\"agrees\": true") &&
                strstr(js, "{\"pass\": \"fusion\", \"agrees\": true") &&
                strstr(js, "\"first_bad_pass\": null"),
            "%s", js);
  /* an expected output that is not the model's: the interpreter disagrees, exit 1 */
  char bad[64], buf[1 << 16];
  snprintf(bad, sizeof bad, "/tmp/hloc_verify_bad_%d.npy", (int)getpid());
  FILE *f = fopen(HLOC_CORPUS_DIR "/fixtures/mlp/out0.npy", "rb");
  cr_assert(f);
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  for (size_t k = n - 64; k < n; k++)
    buf[k] = (char)(buf[k] ^ 0x40);
  write_file(bad, buf, n);
  r = run(HLOC " verify %s/module.pb %s/in0.npy %s/in1.npy %s/in2.npy %s/in3.npy %s/in4.npy "
               "%s/in5.npy %s/in6.npy --expect %s",
          fx, fx, fx, fx, fx, fx, fx, fx, bad);
  unlink(bad);
  cr_expect_eq(r->rc, 1, "%s%s", r->out, r->err);
  cr_expect(strstr(r->out, "DISAGREES"), "%s", r->out);
  r = run(HLOC " verify /nonexistent/m.pb");
  cr_expect_eq(r->rc, 2, "%s", r->err);
  cr_expect_eq(lines(r->err), 1, "%s", r->err);
  r = run(HLOC " verify %s/module.pb %s/in0.npy", fx, fx);
  cr_expect_eq(r->rc, 2, "%s", r->err);
  cr_expect(strstr(r->err, "arguments given"), "%s", r->err);
  r = run(HLOC " verify %s/module.pb --bogus", fx);
  cr_expect_eq(r->rc, 2, "%s", r->err);
}

/* Every corpus fixture verifies clean: no optimizer pass moves its values on random inputs,
 * and every kernel of the CPU target computes what the interpreter does. */
Test(tools, verify_every_fixture, .timeout = 600) {
  DIR *d = opendir(HLOC_CORPUS_DIR "/fixtures");
  cr_assert(d);
  int n = 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    Run *r =
        run(HLOC " verify " HLOC_CORPUS_DIR "/fixtures/%s/module.pb --random-inputs", e->d_name);
    cr_expect_eq(r->rc, 0, "%s: %s%s", e->d_name, r->out, r->err);
    cr_expect(strstr(r->out, "every kernel agrees"), "%s: no kernel bisection: %s", e->d_name,
              r->out);
    n++;
  }
  closedir(d);
  cr_expect_geq(n, 11);
}

#ifdef HLOC_HAVE_CUDA
/* hloc verify --target=cuda: the GPU bundle is prepared; without a GPU here (CI) it waits
 * (exit 3, with the command to give once it ran), and --results on it before its run is a
 * located error naming the missing result; a CPU target refuses the GPU options. */
Test(tools, verify_prepares_a_gpu_bundle, .timeout = 120) {
  const char *fx = HLOC_CORPUS_DIR "/fixtures/mlp";
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/hloc_vb_%d", (int)getpid());
  Run *r = run(HLOC " verify %s/module.pb --target=cuda --bundle %s --json %s.json", fx, dir, dir);
  cr_assert(r->rc == 3 || r->rc == 0, "%s%s", r->out, r->err);
  char path[128], js[16384];
  snprintf(path, sizeof path, "%s.json", dir);
  slurp(path, js, sizeof js);
  unlink(path);
  if (r->rc == 3) { /* no GPU here */
    cr_expect(strstr(r->out, "--results") && strstr(r->out, "run.sh"), "%s", r->out);
    cr_expect(strstr(js, "\"gpu_bundle_pending\""), "%s", js);
    r = run(HLOC " verify %s/module.pb --target=cuda --results %s", fx, dir);
    cr_expect_eq(r->rc, 2, "%s%s", r->out, r->err);
    cr_expect(strstr(r->err, "got0.bin") && lines(r->err) == 1, "%s", r->err);
  } else {
    cr_expect(strstr(r->out, "every kernel agrees"), "%s", r->out);
  }
  snprintf(path, sizeof path, "%s/run", dir);
  cr_expect_eq(access(path, X_OK), 0, "no driver linked in %s", dir);
  r = run(HLOC " verify %s/module.pb --bundle %s", fx, dir);
  cr_expect_eq(r->rc, 2, "%s", r->err);
  cr_expect(strstr(r->err, "--target=cuda"), "%s", r->err);
  run("rm -rf %s", dir);
}
#endif
