/* targets/cpu/cpu_elf.c: joins the two relocatable ELF objects of a split compilation into one
 * (cpu_elf_join, used by cpu_emit.c).
 *
 * Both inputs are ELF64 little-endian relocatable objects that LLVM made for one target from
 * two parts of one module: the first holds the run functions, the global variables and part
 * 0's kernels, the second part 1's kernels; each refers to functions and globals defined in
 * the other through undefined symbols. The join is what a linker's relocatable link (ld -r)
 * does, for the sections LLVM emits for such code:
 *   - sections are matched by name, type, flags and entry size; matched sections are
 *     concatenated (each input section aligned as it asks, the output aligned to the largest),
 *     others are appended after the first object's, in order; SHT_NOBITS sections only grow;
 *   - symbols: the first object's FILE symbol, one section symbol per output section, every
 *     other local symbol of both inputs (value moved by its section's offset in the output),
 *     then the global ones. An undefined symbol whose name the other object defines (as a
 *     local or global symbol) becomes that definition: references between the parts resolve
 *     inside the object. Undefined symbols left (libm, memset) appear once each;
 *   - relocations are moved with their section (offset shifted), point at the joined symbol,
 *     and those against a section symbol get the input section's offset added to the addend.
 * Address-significance tables (.llvm_addrsig) are dropped (an optimization hint only). Groups
 * (COMDAT) and anything else this does not understand is refused with a message; LLVM never
 * makes them for hloc's modules. The output is a function of the inputs only.
 *
 * cpu_elf_join_data joins an object with one made here (el_data): the compilation's large
 * constants (cpu_rodata: 64 KiB and more, frozen weights, packed operands) as one .rodata section
 * with a local symbol each, which the module only declares, so their megabytes do not go through
 * LLVM (its constant arrays and its assembler each held a copy): transformer_layer with 28 MB
 * of frozen weights compiled in 0.19-0.21 s instead of 0.24-0.25 on the 2-core Xeon VM, pinned,
 * with the changes beside it (LLVM's code generation 0.071 -> 0.030 s; the constants referred
 * to, not copied, until this writes them; .npy files read into a buffer of their size and kept
 * by the module as they are parsed). Each input section is copied once, into an output buffer
 * allocated once (it was copied into a growing section buffer, then into a growing object). */
#include "cpu_impl.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ElIn {
  const unsigned char *b; /* the object */
  size_t n;               /* its size */
  const Elf64_Ehdr *eh;   /* header */
  const Elf64_Shdr *sh;   /* section headers */
  const char *shstr;      /* section names */
  const Elf64_Sym *sym;   /* symbol table */
  size_t nsym;            /* symbols */
  const char *str;        /* symbol names */
  size_t strn;            /* size of str */
  int *out_sec;           /* input section -> output section (0: none) */
  uint64_t *out_off;      /* input section -> offset in its output section */
  uint32_t *out_sym;      /* input symbol -> output symbol */
} ElIn;

typedef struct ElSec {
  const char *name;    /* name (in an input's shstrtab) */
  Elf64_Word type;     /* sh_type */
  Elf64_Xword flags;   /* sh_flags */
  Elf64_Xword entsize; /* sh_entsize */
  Elf64_Xword align;   /* largest alignment */
  uint64_t size;       /* bytes */
  struct ElPiece {
    const unsigned char *src;
    uint64_t off, n;
  } * piece;           /* contents: the input
sections' bytes at their offsets, zeros between (none for NOBITS) */
  size_t npiece;       /* pieces */
  uint32_t secsym;     /* its section symbol */
  Elf64_Rela *rel;     /* relocations */
  size_t nrel, relcap; /* count and capacity */
} ElSec;

/* A growable byte buffer. */
typedef struct ElBuf {
  unsigned char *p; /* bytes */
  size_t n, cap;    /* length and capacity */
} ElBuf;

static void el_put(ElBuf *b, const void *d, size_t n) {
  if (b->n + n > b->cap) {
    b->cap = (b->n + n) * 2 + 256;
    b->p = realloc(b->p, b->cap);
    HLO_ASSERT(b->p);
  }
  if (d)
    memcpy(b->p + b->n, d, n);
  else
    memset(b->p + b->n, 0, n);
  b->n += n;
}

/* Capacity for at least n bytes in all (one allocation for a large output). */
static void el_reserve(ElBuf *b, size_t n) {
  if (n <= b->cap) return;
  b->cap = n;
  b->p = realloc(b->p, b->cap);
  HLO_ASSERT(b->p);
}

static void el_align(ElBuf *b, size_t a) {
  while (a > 1 && b->n % a)
    el_put(b, NULL, 1);
}

static uint32_t el_str(ElBuf *b, const char *s) {
  uint32_t at = (uint32_t)b->n;
  el_put(b, s, strlen(s) + 1);
  return at;
}

/* Append the table t (symbols or strings) to obj as the section h describes: its name (added
 * to shstr first, so a table can be .shstrtab itself), type, alignment, offset and size. */
static void el_table(ElBuf *obj, Elf64_Shdr *h, ElBuf *shstr, const char *name, Elf64_Word type,
                     size_t align, const ElBuf *t) {
  h->sh_name = el_str(shstr, name);
  h->sh_type = type;
  h->sh_addralign = align;
  el_align(obj, align);
  h->sh_offset = obj->n;
  h->sh_size = t->n;
  el_put(obj, t->p, t->n);
}

/* Validate and index one input; false with msg. */
static bool el_read(ElIn *in, const void *obj, size_t n, char *msg, size_t mn) {
  memset(in, 0, sizeof *in);
  in->b = obj;
  in->n = n;
  if (n < sizeof(Elf64_Ehdr) || memcmp(obj, ELFMAG, SELFMAG) != 0) {
    snprintf(msg, mn, "not an ELF object");
    return false;
  }
  in->eh = obj;
  const Elf64_Ehdr *e = in->eh;
  if (e->e_ident[EI_CLASS] != ELFCLASS64 || e->e_ident[EI_DATA] != ELFDATA2LSB ||
      e->e_type != ET_REL || e->e_shentsize != sizeof(Elf64_Shdr) || e->e_shoff > n ||
      (n - e->e_shoff) / sizeof(Elf64_Shdr) < e->e_shnum || e->e_shstrndx >= e->e_shnum) {
    snprintf(msg, mn, "not a 64-bit little-endian relocatable ELF object");
    return false;
  }
  in->sh = (const Elf64_Shdr *)(in->b + e->e_shoff);
  for (int i = 0; i < e->e_shnum; i++)
    if (in->sh[i].sh_type != SHT_NOBITS &&
        (in->sh[i].sh_offset > n || in->sh[i].sh_size > n - in->sh[i].sh_offset)) {
      snprintf(msg, mn, "section %d out of bounds", i);
      return false;
    }
  in->shstr = (const char *)in->b + in->sh[e->e_shstrndx].sh_offset;
  for (int i = 0; i < e->e_shnum; i++) {
    const Elf64_Shdr *s = &in->sh[i];
    if (s->sh_type == SHT_SYMTAB) {
      if (in->sym || s->sh_entsize != sizeof(Elf64_Sym) || s->sh_link >= e->e_shnum) {
        snprintf(msg, mn, "unexpected symbol table");
        return false;
      }
      in->sym = (const Elf64_Sym *)(in->b + s->sh_offset);
      in->nsym = s->sh_size / sizeof(Elf64_Sym);
      in->str = (const char *)in->b + in->sh[s->sh_link].sh_offset;
      in->strn = in->sh[s->sh_link].sh_size;
    } else if (s->sh_type == SHT_GROUP || s->sh_type == SHT_SYMTAB_SHNDX || s->sh_type == SHT_REL) {
      snprintf(msg, mn, "unsupported section %s", in->shstr + s->sh_name);
      return false;
    }
  }
  if (!in->sym) {
    snprintf(msg, mn, "no symbol table");
    return false;
  }
  for (size_t k = 0; k < in->nsym; k++)
    if (in->sym[k].st_name >= in->strn) {
      snprintf(msg, mn, "symbol name out of bounds");
      return false;
    }
  in->out_sec = calloc(e->e_shnum, sizeof *in->out_sec);
  in->out_off = calloc(e->e_shnum, sizeof *in->out_off);
  in->out_sym = calloc(in->nsym + 1, sizeof *in->out_sym);
  HLO_ASSERT(in->out_sec && in->out_off && in->out_sym);
  return true;
}

static bool el_placed(const Elf64_Shdr *s) {
  switch (s->sh_type) {
  case SHT_NULL:
  case SHT_SYMTAB:
  case SHT_STRTAB:
  case SHT_RELA: return false;
  case 0x6fff4c03: return false; /* SHT_LLVM_ADDRSIG */
  default: return true;
  }
}

static const char *el_symname(const ElIn *in, size_t k) { return in->str + in->sym[k].st_name; }

/* Index of the defined, named, non-section symbol called name in in (0: none). */
static size_t el_find_def(const ElIn *in, const char *name) {
  for (size_t k = 1; k < in->nsym; k++) {
    const Elf64_Sym *s = &in->sym[k];
    if (s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) == STT_SECTION ||
        ELF64_ST_TYPE(s->st_info) == STT_FILE)
      continue;
    if (!strcmp(el_symname(in, k), name)) return k;
  }
  return 0;
}

bool cpu_elf64le(const char *triple) {
  bool arch = !strncmp(triple, "x86_64-", 7) || !strncmp(triple, "aarch64-", 8) ||
              !strncmp(triple, "riscv64-", 8);
  bool elf = strstr(triple, "-linux") || strstr(triple, "-freebsd") || strstr(triple, "-netbsd") ||
             strstr(triple, "-openbsd") || strstr(triple, "-elf") || strstr(triple, "-none");
  return arch && elf && !strstr(triple, "x32"); /* gnux32: ELF32 objects */
}

bool cpu_elf_join(const void *a, size_t an, const void *b, size_t bn, char **out, size_t *outlen,
                  char *msg, size_t msgn) {
  ElIn in[2];
  bool ok = false;
  ElSec *secs = NULL;
  int nsec = 1; /* [0] is the null section */
  ElBuf syms = {0}, strs = {0}, shstr = {0}, obj = {0};
  memset(in, 0, sizeof in);
  if (!el_read(&in[0], a, an, msg, msgn) || !el_read(&in[1], b, bn, msg, msgn)) goto done;
  if (in[0].eh->e_machine != in[1].eh->e_machine) {
    snprintf(msg, msgn, "objects for different machines");
    goto done;
  }
  /* sections */
  int maxsec = 1 + in[0].eh->e_shnum + in[1].eh->e_shnum;
  secs = calloc((size_t)maxsec, sizeof *secs);
  HLO_ASSERT(secs);
  for (int f = 0; f < 2; f++)
    for (int i = 1; i < in[f].eh->e_shnum; i++) {
      const Elf64_Shdr *s = &in[f].sh[i];
      if (!el_placed(s)) continue;
      const char *name = in[f].shstr + s->sh_name;
      int o = 0;
      for (int k = 1; k < nsec && !o; k++)
        if (!strcmp(secs[k].name, name) && secs[k].type == s->sh_type &&
            secs[k].flags == s->sh_flags && secs[k].entsize == s->sh_entsize)
          o = k;
      if (!o) {
        o = nsec++;
        secs[o].name = name;
        secs[o].type = s->sh_type;
        secs[o].flags = s->sh_flags;
        secs[o].entsize = s->sh_entsize;
        secs[o].align = 1;
      }
      ElSec *os = &secs[o];
      uint64_t al = s->sh_addralign ? s->sh_addralign : 1;
      if (al > os->align) os->align = al;
      uint64_t off = (os->size + al - 1) / al * al;
      if (s->sh_type != SHT_NOBITS && s->sh_size > 0) { /* copied once, into the output */
        os->piece = realloc(os->piece, (os->npiece + 1) * sizeof *os->piece);
        HLO_ASSERT(os->piece);
        os->piece[os->npiece++] = (struct ElPiece){in[f].b + s->sh_offset, off, s->sh_size};
      }
      os->size = off + s->sh_size;
      in[f].out_sec[i] = o;
      in[f].out_off[i] = off;
    }
  /* symbols: null, FILE, section symbols, locals, globals */
  strs.n = 0;
  el_str(&strs, "");
  Elf64_Sym z = {0};
  el_put(&syms, &z, sizeof z);
  uint32_t nout = 1;
  for (size_t k = 1; k < in[0].nsym; k++)
    if (ELF64_ST_TYPE(in[0].sym[k].st_info) == STT_FILE) {
      Elf64_Sym s = in[0].sym[k];
      s.st_name = el_str(&strs, el_symname(&in[0], k));
      el_put(&syms, &s, sizeof s);
      nout++;
      break;
    }
  for (int o = 1; o < nsec; o++) {
    Elf64_Sym s = {0};
    s.st_info = ELF64_ST_INFO(STB_LOCAL, STT_SECTION);
    s.st_shndx = (Elf64_Section)o; /* renumbered below if rela sections come between */
    el_put(&syms, &s, sizeof s);
    secs[o].secsym = nout++;
  }
  /* pass 1: locals; pass 2: defined globals; pass 3: undefined globals */
  for (int pass = 1; pass <= 3; pass++)
    for (int f = 0; f < 2; f++)
      for (size_t k = 1; k < in[f].nsym; k++) {
        const Elf64_Sym *is = &in[f].sym[k];
        int ty = ELF64_ST_TYPE(is->st_info), bind = ELF64_ST_BIND(is->st_info);
        bool undef = is->st_shndx == SHN_UNDEF;
        if (ty == STT_FILE) continue;
        if (ty == STT_SECTION) {
          if (pass == 1) {
            int o = is->st_shndx < in[f].eh->e_shnum ? in[f].out_sec[is->st_shndx] : 0;
            in[f].out_sym[k] = o ? secs[o].secsym : 0;
          }
          continue;
        }
        int want = bind == STB_LOCAL ? 1 : undef ? 3 : 2;
        if (want != pass) continue;
        const char *name = el_symname(&in[f], k);
        if (undef) {
          /* defined by the other object? otherwise one undefined symbol per name */
          if (el_find_def(&in[1 - f], name)) continue; /* mapped after all are placed */
          uint32_t prev = 0;
          if (f == 1)
            for (size_t j = 1; j < in[0].nsym && !prev; j++)
              if (in[0].sym[j].st_shndx == SHN_UNDEF && in[0].out_sym[j] &&
                  !strcmp(el_symname(&in[0], j), name))
                prev = in[0].out_sym[j];
          if (prev) {
            in[f].out_sym[k] = prev;
            continue;
          }
        }
        Elf64_Sym s = *is;
        s.st_name = el_str(&strs, name);
        if (!undef && is->st_shndx < SHN_LORESERVE) {
          if (is->st_shndx >= in[f].eh->e_shnum || !in[f].out_sec[is->st_shndx]) {
            snprintf(msg, msgn, "symbol %s in a section that is not joined", name);
            goto done;
          }
          s.st_shndx = (Elf64_Section)in[f].out_sec[is->st_shndx];
          s.st_value += in[f].out_off[is->st_shndx];
        }
        el_put(&syms, &s, sizeof s);
        in[f].out_sym[k] = nout++;
      }
  uint32_t first_global = 1;
  {
    const Elf64_Sym *os = (const Elf64_Sym *)syms.p;
    for (uint32_t k = 1; k < nout; k++)
      if (ELF64_ST_BIND(os[k].st_info) == STB_LOCAL) first_global = k + 1;
  }
  for (int f = 0; f < 2; f++)
    for (size_t k = 1; k < in[f].nsym; k++) {
      const Elf64_Sym *is = &in[f].sym[k];
      if (is->st_shndx != SHN_UNDEF || in[f].out_sym[k] || ELF64_ST_TYPE(is->st_info) == STT_FILE)
        continue;
      size_t d = el_find_def(&in[1 - f], el_symname(&in[f], k));
      if (!d || !in[1 - f].out_sym[d]) {
        snprintf(msg, msgn, "symbol %s left unplaced", el_symname(&in[f], k));
        goto done;
      }
      in[f].out_sym[k] = in[1 - f].out_sym[d];
    }
  /* relocations */
  for (int f = 0; f < 2; f++)
    for (int i = 1; i < in[f].eh->e_shnum; i++) {
      const Elf64_Shdr *s = &in[f].sh[i];
      if (s->sh_type != SHT_RELA) continue;
      if (s->sh_entsize != sizeof(Elf64_Rela) || s->sh_info >= in[f].eh->e_shnum) {
        snprintf(msg, msgn, "unexpected relocation section %s", in[f].shstr + s->sh_name);
        goto done;
      }
      int t = (int)s->sh_info, o = in[f].out_sec[t];
      if (!o) continue; /* relocations of a dropped section */
      ElSec *os = &secs[o];
      const Elf64_Rela *r = (const Elf64_Rela *)(in[f].b + s->sh_offset);
      size_t nr = s->sh_size / sizeof *r;
      for (size_t k = 0; k < nr; k++) {
        Elf64_Rela nrl = r[k];
        size_t sy = ELF64_R_SYM(r[k].r_info);
        if (sy >= in[f].nsym || (sy && !in[f].out_sym[sy])) {
          snprintf(msg, msgn, "relocation against an unknown symbol");
          goto done;
        }
        if (sy && ELF64_ST_TYPE(in[f].sym[sy].st_info) == STT_SECTION)
          nrl.r_addend += (Elf64_Sxword)in[f].out_off[in[f].sym[sy].st_shndx];
        nrl.r_offset += in[f].out_off[t];
        nrl.r_info = ELF64_R_INFO(sy ? in[f].out_sym[sy] : 0, ELF64_R_TYPE(r[k].r_info));
        if (os->nrel == os->relcap) {
          os->relcap = os->relcap ? os->relcap * 2 : 64;
          os->rel = realloc(os->rel, os->relcap * sizeof *os->rel);
          HLO_ASSERT(os->rel);
        }
        os->rel[os->nrel++] = nrl;
      }
    }
  /* layout: header, section contents, relocations, symbols, strings, section headers. Output
     section numbers: the joined sections 1..nsec-1, then one .rela per section that has
     relocations, .symtab, .strtab, .shstrtab. */
  int nrela = 0;
  for (int o = 1; o < nsec; o++)
    nrela += secs[o].nrel > 0;
  int symtab_ix = nsec + nrela, strtab_ix = symtab_ix + 1, shstr_ix = symtab_ix + 2,
      nsh = symtab_ix + 3;
  Elf64_Shdr *sh = calloc((size_t)nsh, sizeof *sh);
  HLO_ASSERT(sh);
  el_str(&shstr, "");
  Elf64_Ehdr eh = *in[0].eh;
  el_reserve(&obj, an + bn + syms.n + strs.n + 4096 + sizeof *sh * (size_t)nsh); /* no regrowth */
  el_put(&obj, NULL, sizeof eh);
  for (int o = 1; o < nsec; o++) {
    ElSec *os = &secs[o];
    sh[o].sh_name = el_str(&shstr, os->name);
    sh[o].sh_type = os->type;
    sh[o].sh_flags = os->flags;
    sh[o].sh_addralign = os->align;
    sh[o].sh_entsize = os->entsize;
    sh[o].sh_size = os->size;
    el_align(&obj, os->align);
    sh[o].sh_offset = obj.n;
    if (os->type != SHT_NOBITS) {
      size_t base = obj.n;
      for (size_t q = 0; q < os->npiece; q++) {
        el_put(&obj, NULL, base + os->piece[q].off - obj.n);
        el_put(&obj, os->piece[q].src, os->piece[q].n);
      }
      el_put(&obj, NULL, base + os->size - obj.n);
    }
  }
  int ri = nsec;
  for (int o = 1; o < nsec; o++) {
    ElSec *os = &secs[o];
    if (!os->nrel) continue;
    char nm[512];
    snprintf(nm, sizeof nm, ".rela%s", os->name);
    sh[ri].sh_name = el_str(&shstr, nm);
    sh[ri].sh_type = SHT_RELA;
    sh[ri].sh_flags = SHF_INFO_LINK;
    sh[ri].sh_link = (Elf64_Word)symtab_ix;
    sh[ri].sh_info = (Elf64_Word)o;
    sh[ri].sh_addralign = 8;
    sh[ri].sh_entsize = sizeof(Elf64_Rela);
    el_align(&obj, 8);
    sh[ri].sh_offset = obj.n;
    sh[ri].sh_size = os->nrel * sizeof(Elf64_Rela);
    el_put(&obj, os->rel, sh[ri].sh_size);
    ri++;
  }
  sh[symtab_ix].sh_link = (Elf64_Word)strtab_ix;
  sh[symtab_ix].sh_info = first_global;
  sh[symtab_ix].sh_entsize = sizeof(Elf64_Sym);
  el_table(&obj, &sh[symtab_ix], &shstr, ".symtab", SHT_SYMTAB, 8, &syms);
  el_table(&obj, &sh[strtab_ix], &shstr, ".strtab", SHT_STRTAB, 1, &strs);
  el_table(&obj, &sh[shstr_ix], &shstr, ".shstrtab", SHT_STRTAB, 1, &shstr);
  el_align(&obj, 8);
  eh.e_shoff = obj.n;
  eh.e_shnum = (Elf64_Half)nsh;
  eh.e_shstrndx = (Elf64_Half)shstr_ix;
  el_put(&obj, sh, sizeof *sh * (size_t)nsh);
  memcpy(obj.p, &eh, sizeof eh);
  free(sh);
  if (first_global < nout) {
    /* locals must all come before globals: they do by construction; check it */
    const Elf64_Sym *os = (const Elf64_Sym *)syms.p;
    for (uint32_t k = first_global; k < nout; k++)
      HLO_ASSERT(ELF64_ST_BIND(os[k].st_info) != STB_LOCAL);
  }
  *out = (char *)obj.p;
  *outlen = obj.n;
  obj.p = NULL;
  ok = true;
done:
  for (int f = 0; f < 2; f++) {
    free(in[f].out_sec);
    free(in[f].out_off);
    free(in[f].out_sym);
  }
  for (int o = 0; secs && o < nsec; o++) {
    free(secs[o].piece);
    free(secs[o].rel);
  }
  free(secs);
  free(syms.p);
  free(strs.p);
  free(shstr.p);
  free(obj.p);
  return ok;
}

/* The object of one .rodata section holding the entries of sym (cpu_elf_join_data). */
static void el_data(unsigned machine, const CpuElfSym *sym, int nsym, char **out, size_t *outlen) {
  /* sections: [1] .rodata (the data), [2] .symtab, [3] .strtab, [4] .shstrtab; symbols: the null
     one, .rodata's section symbol, then one local object per entry */
  ElBuf obj = {0}, syms = {0}, strs = {0}, shstr = {0};
  Elf64_Shdr sh[5];
  memset(sh, 0, sizeof sh);
  Elf64_Ehdr eh;
  memset(&eh, 0, sizeof eh);
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_ident[EI_VERSION] = EV_CURRENT;
  eh.e_type = ET_REL;
  eh.e_machine = (Elf64_Half)machine;
  eh.e_version = EV_CURRENT;
  eh.e_ehsize = sizeof eh;
  eh.e_shentsize = sizeof(Elf64_Shdr);
  size_t n = 0;
  for (int i = 0; i < nsym; i++)
    n = (n + 63) / 64 * 64 + sym[i].size;
  el_reserve(&obj, sizeof eh + n + 64 + (size_t)(nsym + 2) * (sizeof(Elf64_Sym) + 64) + 4096);
  el_put(&obj, NULL, sizeof eh);
  el_str(&shstr, "");
  el_str(&strs, "");
  Elf64_Sym s0;
  memset(&s0, 0, sizeof s0);
  el_put(&syms, &s0, sizeof s0);
  s0.st_info = ELF64_ST_INFO(STB_LOCAL, STT_SECTION);
  s0.st_shndx = 1;
  el_put(&syms, &s0, sizeof s0);
  /* .rodata: the entries, each copied once, straight into the object */
  sh[1].sh_name = el_str(&shstr, ".rodata");
  sh[1].sh_type = SHT_PROGBITS;
  sh[1].sh_flags = SHF_ALLOC;
  sh[1].sh_addralign = 64;
  el_align(&obj, 64);
  sh[1].sh_offset = obj.n;
  for (int i = 0; i < nsym; i++) {
    el_align(&obj, 64);
    Elf64_Sym s;
    memset(&s, 0, sizeof s);
    s.st_name = el_str(&strs, sym[i].name);
    s.st_info = ELF64_ST_INFO(STB_LOCAL, STT_OBJECT);
    s.st_shndx = 1;
    s.st_value = obj.n - sh[1].sh_offset;
    s.st_size = sym[i].size;
    el_put(&syms, &s, sizeof s);
    el_put(&obj, sym[i].data, sym[i].size);
  }
  sh[1].sh_size = obj.n - sh[1].sh_offset;
  sh[2].sh_link = 3;
  sh[2].sh_info = (Elf64_Word)(nsym + 2); /* every symbol local */
  sh[2].sh_entsize = sizeof(Elf64_Sym);
  el_table(&obj, &sh[2], &shstr, ".symtab", SHT_SYMTAB, 8, &syms);
  el_table(&obj, &sh[3], &shstr, ".strtab", SHT_STRTAB, 1, &strs);
  el_table(&obj, &sh[4], &shstr, ".shstrtab", SHT_STRTAB, 1, &shstr);
  el_align(&obj, 8);
  eh.e_shoff = obj.n;
  eh.e_shnum = 5;
  eh.e_shstrndx = 4;
  el_put(&obj, sh, sizeof sh);
  memcpy(obj.p, &eh, sizeof eh);
  free(syms.p);
  free(strs.p);
  free(shstr.p);
  *out = (char *)obj.p;
  *outlen = obj.n;
}

bool cpu_elf_join_data(const void *a, size_t an, const CpuElfSym *sym, int nsym, char **out,
                       size_t *outlen, char *msg, size_t msgn) {
  if (an < sizeof(Elf64_Ehdr)) {
    snprintf(msg, msgn, "not an ELF object");
    return false;
  }
  Elf64_Ehdr eh;
  memcpy(&eh, a, sizeof eh);
  char *data = NULL;
  size_t dn = 0;
  el_data(eh.e_machine, sym, nsym, &data, &dn);
  bool ok = cpu_elf_join(a, an, data, dn, out, outlen, msg, msgn);
  free(data);
  return ok;
}
