/* targets/gen/gen_header.c: text both targets' generated C headers share.
 *
 * The headers of a CPU and of a CUDA compilation differ in their entry points but list the
 * arguments and results alike, carry the module's interface notes, and declare the same
 * guarded runtime types (so that headers of both targets can be included in one translation
 * unit); HLO names, arbitrary strings in a module proto, are made safe inside C comments. */
#include "gen.h"

#include <string.h>

const char *gen_comment_safe(char *dst, size_t n, const char *s) {
  size_t o = 0;
  for (; s && *s && o + 2 < n; s++) {
    unsigned char ch = (unsigned char)*s;
    dst[o++] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
    if ((ch == '*' && s[1] == '/') || (ch == '/' && s[1] == '*')) dst[o++] = ' ';
  }
  dst[o] = 0;
  return dst;
}

/* One line of the argument/result list in the header's comment. */
void gen_header_shape_line(HStr *b, int i, const char *name, const Shape *s) {
  char sh[256], nm[512];
  hlo_shape_snprint(sh, sizeof sh, s, false);
  hlo_str_printf(b, " *   %3d  %-40s %s (%zu bytes)\n", i, gen_comment_safe(nm, sizeof nm, name),
                 sh, hlo_shape_bytes(s));
}

void gen_header_note(HStr *b, const HModule *m, const char *key) {
  const char *note = hlo_module_iface_find(m, key);
  char nt[1024];
  if (note) hlo_str_printf(b, " *          (%s)\n", gen_comment_safe(nt, sizeof nt, note));
}

/* The types every generated header shares (CPU and CUDA), guarded so that headers of
 * several models, of either target, can be included in one program. */
void gen_header_runtime_types(HStr *b) {
  hlo_str_printf(
      b,
      "#ifndef HLOC_RUNTIME_TYPES_DEFINED\n"
      "#define HLOC_RUNTIME_TYPES_DEFINED\n"
      "/* One argument or result of a compiled model. */\n"
      "typedef struct hloc_tensor_info {\n"
      "  const char *name;  /* HLO instruction name */\n"
      "  const char *dtype; /* HLO element type: \"f32\", \"s32\", \"pred\", ... */\n"
      "  int32_t rank;      /* number of dimensions */\n"
      "  int64_t dims[8];   /* dimension sizes, dims[0] outermost; unused entries 0 */\n"
      "  size_t bytes;      /* size of the dense row-major data */\n"
      "} hloc_tensor_info;\n"
      "/* A task of a parallel loop: runs chunk i of the work described by ctx. */\n"
      "typedef void (*hloc_task_fn)(void *ctx, int64_t i);\n"
      "/* The caller's parallel-for: calls fn(ctx, i) for every i in [0, n), returns when\n"
      "   all calls have returned. */\n"
      "typedef void (*hloc_parallel_for_fn)(void *runner, int64_t n, hloc_task_fn fn, void *ctx);\n"
      "#endif\n\n");
}

void gen_header_version(HStr *b, const char *U) {
  hlo_str_printf(b,
                 "#define %s_HLOC_VERSION \"%s (commit %s)\" /* the compiler that wrote this */\n",
                 U, hlo_version(), hlo_commit());
}
