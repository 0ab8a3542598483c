/* tools/hloc.c: the compiler driver.
 *
 *   hloc FILE                       read (.pb or .hlo), verify, print a one-line summary
 *   hloc FILE --emit=hlo [-o OUT]   print the module as HLO text
 *   hloc FILE -o model.o            compile for the host CPU: model.o + model.h
 *   hloc FILE --emit=hlo-opt        print the module after the optimization pipeline
 *
 * The driver only parses flags and calls library entry points in order (load, verify,
 * compile); each phase reports one located line on failure and the driver exits 1. */
#include "hlo.h"
#include "optimizer.h"
#include "proto.h"
#if __has_include("target.h")
#include "target.h"
#define HLOC_HAVE_CPU 1
#endif

#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
  fputs("usage: hloc FILE [options]\n"
        "  FILE                 HloModuleProto (.pb, also HloProto/HloSnapshot) or HLO text\n"
        "  -o PATH              output file (object by default)\n"
        "  --emit=KIND          hlo | hlo-opt | llvm | asm | obj (default: obj with -o,\n"
        "                       else a summary); hlo prints the module as read, hlo-opt after\n"
        "                       optimization\n"
        "  --name NAME          symbol prefix of the generated code (default: stem of -o)\n"
        "  --header PATH        where to write the C header (default: beside -o, .h)\n"
        "  --target=cpu         code generation target (cpu; cuda is not available yet)\n"
        "  --cpu NAME           CPU to generate code for (default: the host CPU)\n"
        "  --features LIST      CPU features, LLVM syntax (+avx2,-avx512f; default: host)\n"
        "  -O0 .. -O3           optimization level (default -O2)\n"
        "  --dump-passes[=DIR]  dump the module after every pass that changed it, the final\n"
        "                       module and reports into DIR (default: hloc_dumps)\n"
        "  --time-passes        print the time spent in each pass\n"
        "  --disable-pass=NAME  do not run pass NAME (repeatable)\n"
        "  --stop-after=NAME    stop the pipeline after pass NAME\n"
        "  --list-passes        list the optimizer passes\n"
        "  -h, --help           this text\n",
        f);
}

static const char *flag_value(int argc, char **argv, int *i, const char *flag) {
  size_t n = strlen(flag);
  if (!strncmp(argv[*i], flag, n) && argv[*i][n] == '=') return argv[*i] + n + 1;
  if (!strcmp(argv[*i], flag)) {
    if (*i + 1 >= argc) {
      fprintf(stderr, "hloc: %s needs a value\n", flag);
      exit(1);
    }
    return argv[++*i];
  }
  return NULL;
}

/* Stem of a path: "dir/model.o" -> "model", made a valid C identifier. */
static char *stem_identifier(const char *path) {
  const char *b = strrchr(path, '/');
  b = b ? b + 1 : path;
  size_t n = strcspn(b, ".");
  char *s = malloc(n + 2);
  size_t k = 0;
  if (n == 0 || (b[0] >= '0' && b[0] <= '9')) s[k++] = 'm';
  for (size_t i = 0; i < n; i++) {
    char c = b[i];
    s[k++] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '_';
  }
  s[k] = 0;
  return s;
}

static char *replace_ext(const char *path, const char *ext) {
  const char *slash = strrchr(path, '/');
  const char *dot = strrchr(path, '.');
  size_t n = dot && (!slash || dot > slash) ? (size_t)(dot - path) : strlen(path);
  char *s = malloc(n + strlen(ext) + 1);
  memcpy(s, path, n);
  strcpy(s + n, ext);
  return s;
}

int main(int argc, char **argv) {
  const char *input = NULL, *out = NULL, *emit = NULL, *name = NULL, *header = NULL;
  const char *target = "cpu", *cpu = NULL, *features = NULL;
  int opt = 2;
  OptOpts oo = {0};
#ifndef NDEBUG
  oo.verify_each = true; /* debug builds verify after every changing pass */
#endif
  for (int i = 1; i < argc; i++) {
    const char *v;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--list-passes")) {
      for (int k = 0; k < opt_pass_count(); k++)
        printf("%-20s %s\n", opt_pass_at(k)->name, opt_pass_at(k)->summary);
      return 0;
    } else if (!strcmp(argv[i], "--dump-passes")) {
      oo.dump_dir = "hloc_dumps";
    } else if (!strncmp(argv[i], "--dump-passes=", 14)) {
      oo.dump_dir = argv[i] + 14;
    } else if (!strcmp(argv[i], "--time-passes")) {
      oo.time_passes = true;
    } else if ((v = flag_value(argc, argv, &i, "--disable-pass"))) {
      if (oo.ndisabled == OPT_MAX_DISABLED) {
        fprintf(stderr, "hloc: too many --disable-pass options\n");
        return 1;
      }
      oo.disabled[oo.ndisabled++] = v;
    } else if ((v = flag_value(argc, argv, &i, "--stop-after"))) {
      oo.stop_after = v;
    } else if ((v = flag_value(argc, argv, &i, "-o"))) {
      out = v;
    } else if ((v = flag_value(argc, argv, &i, "--emit"))) {
      emit = v;
    } else if ((v = flag_value(argc, argv, &i, "--name"))) {
      name = v;
    } else if ((v = flag_value(argc, argv, &i, "--header"))) {
      header = v;
    } else if ((v = flag_value(argc, argv, &i, "--target"))) {
      target = v;
    } else if ((v = flag_value(argc, argv, &i, "--cpu"))) {
      cpu = v;
    } else if ((v = flag_value(argc, argv, &i, "--features"))) {
      features = v;
    } else if (argv[i][0] == '-' && argv[i][1] == 'O' && argv[i][2] >= '0' && argv[i][2] <= '3' &&
               !argv[i][3]) {
      opt = argv[i][2] - '0';
    } else if (argv[i][0] == '-' && argv[i][1]) {
      fprintf(stderr, "hloc: unknown option '%s' (see hloc --help)\n", argv[i]);
      return 1;
    } else if (!input) {
      input = argv[i];
    } else {
      fprintf(stderr, "hloc: more than one input file ('%s' and '%s')\n", input, argv[i]);
      return 1;
    }
  }
  if (!input) {
    usage(stderr);
    return 1;
  }
  if (emit && strcmp(emit, "hlo") && strcmp(emit, "hlo-opt") && strcmp(emit, "llvm") &&
      strcmp(emit, "asm") && strcmp(emit, "obj")) {
    fprintf(stderr, "hloc: unknown --emit kind '%s' (hlo, hlo-opt, llvm, asm, obj)\n", emit);
    return 1;
  }
  if (strcmp(target, "cpu")) {
    fprintf(stderr, "hloc: target '%s' is not available in this build (available: cpu)\n",
            target);
    return 1;
  }

  HErr err = {0};
  HModule *m = proto_load_file(input, &err);
  if (!m || !hlo_verify(m, &err)) {
    fprintf(stderr, "hloc: %s\n", err.msg);
    hlo_module_free(m);
    return 1;
  }

  /* everything but printing the module as read goes through the optimizer */
  bool as_read = (!emit && !out && !oo.dump_dir) || (emit && !strcmp(emit, "hlo"));
  if (!as_read && !opt_optimize(m, &oo, &err)) {
    fprintf(stderr, "hloc: %s\n", err.msg);
    hlo_module_free(m);
    return 1;
  }

  int rc = 0;
  if (!emit && !out) {
    int ninstr = 0;
    for (int i = 0; i < m->ncomps; i++) ninstr += m->comps[i]->ninstrs;
    printf("%s: module %s: %d computations, %d instructions, %d parameters: verified\n", input,
           m->name, m->ncomps, ninstr, m->entry->nparams);
  } else if (emit && (!strcmp(emit, "hlo") || !strcmp(emit, "hlo-opt"))) {
    if (!out) {
      hlo_print_module(stdout, m, NULL);
    } else {
      char *buf = NULL;
      size_t len = 0;
      FILE *f = open_memstream(&buf, &len);
      hlo_print_module(f, m, NULL);
      fclose(f);
      if (!hlo_write_file_atomic(out, buf, len, &err)) {
        fprintf(stderr, "hloc: %s\n", err.msg);
        rc = 1;
      }
      free(buf);
    }
  } else {
#ifdef HLOC_HAVE_CPU
    if (!out) {
      fprintf(stderr, "hloc: --emit=%s needs -o PATH\n", emit);
      hlo_module_free(m);
      return 1;
    }
    char *nm = name ? strdup(name) : stem_identifier(out);
    char *hdr = NULL;
    CpuOpts o = {0};
    o.name = nm;
    o.out_path = out;
    o.cpu = cpu;
    o.features = features;
    o.opt_level = opt;
    o.emit = !emit || !strcmp(emit, "obj") ? CPU_EMIT_OBJ
             : !strcmp(emit, "asm")          ? CPU_EMIT_ASM
                                             : CPU_EMIT_LLVM;
    if (o.emit == CPU_EMIT_OBJ) o.header_path = header ? header : (hdr = replace_ext(out, ".h"));
    else o.header_path = header;
    if (!cpu_compile(m, &o, &err)) {
      fprintf(stderr, "hloc: %s\n", err.msg);
      rc = 1;
    }
    free(nm);
    free(hdr);
#else
    (void)name, (void)header, (void)cpu, (void)features, (void)opt;
    fprintf(stderr, "hloc: code generation is not available in this build\n");
    rc = 1;
#endif
  }
  hlo_module_free(m);
  return rc;
}
