/* proto/load.c: open a module file in either of XLA's two forms.
 *
 * HLO text begins with the keyword "HloModule" and a blank once leading whitespace and
 * comments (slash-star blocks and double-slash lines) are skipped, or, without that header
 * (XLA's parser takes such modules: its test files have them), with ENTRY or a computation's
 * name followed by its signature or body. A serialized module
 * practically never does: its first byte is a field tag, and although the name field's tag
 * (0x0a) and some length bytes are whitespace, that would still need a module whose name
 * is "HloModule" followed by a blank, or an identifier's bytes followed by '{' or '('. A leading
 * '/' is wire type 7, which no protobuf can start with, so an unterminated comment is text (the
 * parser reports it). So: text goes to hlo_parse_text, everything else, including an empty file, to
 * proto_read_module, which reports malformed bytes itself. */
#include "proto.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* True when the buffer is HLO text: "HloModule" after whitespace and comments. */
static bool looks_like_text(const char *p, size_t n) {
  const char *end = p + n;
  while (p < end) {
    if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') {
      p++;
    } else if (end - p >= 2 && p[0] == '/' && p[1] == '/') {
      while (p < end && *p != '\n')
        p++;
    } else if (end - p >= 2 && p[0] == '/' && p[1] == '*') {
      const char *q = p + 2;
      while (q + 1 < end && !(q[0] == '*' && q[1] == '/'))
        q++;
      if (q + 1 >= end) return true; /* unterminated comment: text, the parser says so */
      p = q + 2;
    } else {
      break;
    }
  }
  if ((size_t)(end - p) >= 10 && !memcmp(p, "HloModule", 9) &&
      (p[9] == ' ' || p[9] == '\t' || p[9] == '\n' || p[9] == '\r'))
    return true;
  /* a module without its header (XLA's parser takes one, and its test files use them): a
     computation's name, then its signature or body */
  const char *q = p;
  while (q < end && (isalnum((unsigned char)*q) || *q == '_' || *q == '.' || *q == '-'))
    q++;
  if (q == p || !(isalpha((unsigned char)*p) || *p == '_')) return false;
  while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
    q++;
  return q < end && (*q == '{' || *q == '(' || (q - p >= 5 && !memcmp(p, "ENTRY", 5)));
}

HModule *proto_load_file(const char *path, HErr *err) {
  char *buf;
  size_t len;
  if (!hlo_read_file(path, &buf, &len, err)) return NULL;
  HModule *m = looks_like_text(buf, len) ? hlo_parse_text(buf, len, path, err)
                                         : proto_read_module((const uint8_t *)buf, len, path, err);
  free(buf);
  return m;
}
