/* hlo/npy.c: NumPy .npy reader and writer for interpreter and test inputs/outputs.
 *
 * Format: magic "\x93NUMPY", major/minor version, header length (2 bytes in v1, 4 in v2/v3),
 * then an ASCII Python dict {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } and
 * the raw C-order data. The reader accepts little-endian (or byte-order-free) descr codes
 * for every supported dtype and fortran_order=False only; everything is checked against the
 * buffer length, and a malformed file is one located error. NumPy has no bfloat16: such
 * arrays arrive as 2-byte bit patterns ('<u2', or ml_dtypes' '|V2'), read as u16 and typed by
 * the module's parameter through hlo_literal_bits_as; bf16 is written as '<u2' bits, the
 * corpus's convention. The fp8 types (f8e4m3fn, f8e5m2) likewise: read from '|u1' or ml_dtypes'
 * '|V1' as u8 bits, written as '|u1' bits. The 4-bit integers (s4, u4) are one element per
 * byte as in ml_dtypes (whose int4 arrays save as '|V1'): read from '|i1', '|u1' or '|V1' and
 * typed by the module (the byte's low 4 bits are the value), written as '|i1' (s4) or '|u1'
 * (u4) bytes holding the value, so numpy reads the integers. Complex arrays are numpy's '<c8' (c64)
 * and '<c16' (c128), whose bytes are the IR's (real, imaginary) pairs. The writer emits v1.0 and
 * writes atomically. */
#include "hlo.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const struct {
  const char *descr; /* descr without byte-order char */
  DType dt;
} npy_types[] = {
    {"b1", DT_PRED},
    {"i1", DT_S8},
    {"i2", DT_S16},
    {"i4", DT_S32},
    {"i8", DT_S64},
    {"u1", DT_U8},
    {"u2", DT_U16},
    {"u4", DT_U32},
    {"u8", DT_U64},
    {"f2", DT_F16},
    {"f4", DT_F32},
    {"f8", DT_F64},
    {"c8", DT_C64}, /* interleaved real and imaginary parts, as the IR stores them */
    {"c16", DT_C128},
    /* ml_dtypes' bfloat16 and float8 arrays: raw element bits, typed by the module */
    {"V2", DT_U16},
    {"V1", DT_U8},
};

/* Find `'key':` in the header dict; returns pointer after the colon and spaces, or NULL. */
static const char *dict_find(const char *h, size_t n, const char *key) {
  size_t kl = strlen(key);
  for (size_t i = 0; i + kl + 2 < n; i++) {
    if ((h[i] == '\'' || h[i] == '"') && !memcmp(h + i + 1, key, kl) && h[i + 1 + kl] == h[i]) {
      size_t j = i + kl + 2;
      while (j < n && h[j] == ' ')
        j++;
      if (j >= n || h[j] != ':') continue;
      j++;
      while (j < n && h[j] == ' ')
        j++;
      return j < n ? h + j : NULL;
    }
  }
  return NULL;
}

Literal *hlo_npy_parse(HArena *a, const void *buf, size_t len, const char *file, HErr *err) {
  const unsigned char *b = buf;
  if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
    hlo_err(err, file, NULL, NULL, "not a .npy file (bad magic)");
    return NULL;
  }
  unsigned major = b[6];
  size_t hlen, off;
  if (major == 1) {
    hlen = (size_t)b[8] | (size_t)b[9] << 8;
    off = 10;
  } else if (major == 2 || major == 3) {
    if (len < 12) {
      hlo_err(err, file, NULL, NULL, "truncated .npy header");
      return NULL;
    }
    hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
    off = 12;
  } else {
    hlo_err(err, file, NULL, NULL, "unsupported .npy version %u", major);
    return NULL;
  }
  if (hlen > len - off) {
    hlo_err(err, file, NULL, NULL, "truncated .npy header (%zu bytes announced, %zu present)", hlen,
            len - off);
    return NULL;
  }
  const char *h = (const char *)b + off;
  const char *d = dict_find(h, hlen, "descr");
  const char *fo = dict_find(h, hlen, "fortran_order");
  const char *sh = dict_find(h, hlen, "shape");
  if (!d || !fo || !sh) {
    hlo_err(err, file, NULL, NULL, "malformed .npy header: missing descr, fortran_order or shape");
    return NULL;
  }
  const char *hend = h + hlen;
  /* descr */
  if (*d != '\'' && *d != '"') {
    hlo_err(err, file, NULL, NULL, "malformed .npy header: descr is not a string");
    return NULL;
  }
  char q = *d++;
  const char *de = d < hend ? memchr(d, q, (size_t)(hend - d)) : NULL;
  if (!de) {
    hlo_err(err, file, NULL, NULL, "malformed .npy header: unterminated descr");
    return NULL;
  }
  size_t dl = (size_t)(de - d);
  const char *code = d;
  if (dl >= 3 && (d[0] == '<' || d[0] == '|' || d[0] == '=' || d[0] == '>')) {
    /* one-byte elements have no byte order */
    if (d[0] == '>' && !(dl == 3 && d[2] == '1')) {
      hlo_err(err, file, NULL, NULL, "big-endian .npy data ('%.*s') is not supported", (int)dl, d);
      return NULL;
    }
    code = d + 1;
    dl--;
  }
  DType dt = DT_INVALID;
  for (size_t i = 0; i < sizeof npy_types / sizeof *npy_types; i++)
    if (dl == strlen(npy_types[i].descr) && !memcmp(code, npy_types[i].descr, dl))
      dt = npy_types[i].dt;
  if (dt == DT_INVALID) {
    hlo_err(err, file, NULL, NULL, "unsupported .npy dtype '%.*s'", (int)(de - d), d);
    return NULL;
  }
  if (hend - fo < 5 || memcmp(fo, "False", 5) != 0) {
    hlo_err(err, file, NULL, NULL, "fortran_order .npy arrays are not supported");
    return NULL;
  }
  /* shape tuple */
  if (*sh != '(') {
    hlo_err(err, file, NULL, NULL, "malformed .npy header: shape is not a tuple");
    return NULL;
  }
  int64_t dims[HLO_MAX_RANK];
  int rank = 0;
  const char *p = sh + 1;
  for (;;) {
    while (p < hend && (*p == ' ' || *p == ','))
      p++;
    if (p >= hend) {
      hlo_err(err, file, NULL, NULL, "malformed .npy header: unterminated shape");
      return NULL;
    }
    if (*p == ')') break;
    if (!isdigit((unsigned char)*p)) {
      hlo_err(err, file, NULL, NULL, "malformed .npy header: bad shape entry");
      return NULL;
    }
    if (rank == HLO_MAX_RANK) {
      hlo_err(err, file, NULL, NULL, ".npy array rank exceeds %d", HLO_MAX_RANK);
      return NULL;
    }
    int64_t v = 0;
    while (p < hend && isdigit((unsigned char)*p)) {
      if (v > (INT64_C(1) << 40)) {
        hlo_err(err, file, NULL, NULL, ".npy dimension too large");
        return NULL;
      }
      v = v * 10 + (*p++ - '0');
    }
    while (p < hend && *p == 'L')
      p++;
    dims[rank++] = v;
  }
  Shape s = hlo_shape_array(dt, rank, dims);
  /* element count, guarding against overflow */
  size_t es = hlo_dtype_size(dt), count = 1;
  for (int i = 0; i < rank; i++) {
    if (dims[i] && count > (SIZE_MAX / 16) / (size_t)dims[i]) {
      hlo_err(err, file, NULL, NULL, ".npy array too large");
      return NULL;
    }
    count *= (size_t)dims[i];
  }
  size_t need = count * es, have = len - off - hlen;
  if (have < need) {
    hlo_err(err, file, NULL, NULL, "truncated .npy data: %zu bytes expected, %zu present", need,
            have);
    return NULL;
  }
  Literal *l = hlo_literal_new(a, &s);
  memcpy(l->data, b + off + hlen, need);
  if (dt == DT_PRED)
    for (size_t i = 0; i < count; i++)
      ((uint8_t *)l->data)[i] = ((uint8_t *)l->data)[i] != 0;
  return l;
}

Literal *hlo_npy_read(HArena *a, const char *path, HErr *err) {
  char *buf;
  size_t len;
  if (!hlo_read_file(path, &buf, &len, err)) return NULL;
  Literal *l = hlo_npy_parse(a, buf, len, path, err);
  free(buf);
  return l;
}

static const char *npy_descr(DType t) {
  switch (t) {
  case DT_PRED: return "|b1";
  case DT_S8: return "|i1";
  case DT_S16: return "<i2";
  case DT_S32: return "<i4";
  case DT_S64: return "<i8";
  case DT_U8: return "|u1";
  case DT_U16: return "<u2";
  case DT_U32: return "<u4";
  case DT_U64: return "<u8";
  case DT_F16: return "<f2";
  case DT_F32: return "<f4";
  case DT_F64: return "<f8";
  case DT_C64: return "<c8";
  case DT_C128: return "<c16";
  case DT_S4: return "|i1"; /* the byte holds the value, sign-extended */
  case DT_U4: return "|u1";
  case DT_BF16:
  case DT_F8E4M3FN:
  case DT_F8E5M2: /* written as bits: hlo_npy_write */
  case DT_INVALID:
  case DT_TOKEN:
  case DT_TUPLE:
  case DT_COUNT: break;
  }
  return NULL;
}

bool hlo_npy_write(const char *path, const Literal *l, HErr *err) {
  const Shape *s = &l->shape;
  DType dt = s->dt;
  const void *data = l->data;
  size_t n = (size_t)hlo_shape_elems(s);
  /* bit patterns: .view(ml_dtypes.bfloat16) (or float8_e4m3fn, float8_e5m2) reads them back */
  if (dt == DT_BF16) dt = DT_U16;
  if (hlo_dtype_is_fp8(dt)) dt = DT_U8;
  const char *descr = npy_descr(dt);
  if (!descr) {
    hlo_err(err, path, NULL, NULL, "cannot write a %s value as .npy", hlo_dtype_name(s->dt));
    return false;
  }
  char hdr[512];
  int k = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
  for (int i = 0; i < s->rank; i++)
    k += snprintf(hdr + k, sizeof hdr - (size_t)k, "%lld,%s", (long long)s->dims[i],
                  i + 1 < s->rank ? " " : "");
  if (s->rank > 1) k--; /* numpy writes (2, 3) but (5,) for rank 1 */
  k += snprintf(hdr + k, sizeof hdr - (size_t)k, "), }");
  size_t total = 10 + (size_t)k + 1;
  size_t pad = (64 - total % 64) % 64;
  size_t hlen = (size_t)k + pad + 1;
  size_t bytes = n * hlo_dtype_size(dt);
  unsigned char *out = malloc(10 + hlen + bytes);
  memcpy(out, "\x93NUMPY\x01\x00", 8);
  out[8] = (unsigned char)(hlen & 0xff);
  out[9] = (unsigned char)(hlen >> 8);
  memcpy(out + 10, hdr, (size_t)k);
  memset(out + 10 + k, ' ', pad);
  out[10 + hlen - 1] = '\n';
  memcpy(out + 10 + hlen, data, bytes);
  bool ok = hlo_write_file_atomic(path, out, 10 + hlen + bytes, err);
  free(out);
  return ok;
}
