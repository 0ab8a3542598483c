/* proto/proto.h: reading XLA's serialized HloModuleProto into the hloc IR, and writing one.
 *
 * One header for the proto/ directory, sectioned by the .c file that implements each part.
 * Only this directory knows protobuf-c; no generated Xla__ type appears here, so the rest of
 * hloc sees modules only as HModule. */
#ifndef HLOC_PROTO_H
#define HLOC_PROTO_H

#include "hlo.h"

/* ------------------------------------------------------------------ read.c */

/* Decode a serialized xla.HloModuleProto, or one wrapped in xla.HloProto (what
 * --xla_dump_hlo_as_proto writes) or xla.HloSnapshot, into a new module. file names the input
 * in messages (NULL: "<input>"). NULL with a located one-line error on malformed bytes or an
 * inconsistent graph; never crashes on bad input. */
HModule *proto_read_module(const uint8_t *buf, size_t len, const char *file, HErr *err);

/* ------------------------------------------------------------------ write.c */

/* Serialize m as an xla.HloModuleProto that XLA reads (read back by proto_read_module, it
 * prints as m does) into *out (malloc'd, *len bytes). false with a located error for what a
 * proto cannot hold: an elided constant, a verbatim attribute with no field. */
bool proto_write_module(const HModule *m, uint8_t **out, size_t *len, HErr *err);

/* ------------------------------------------------------------------ load.c */

/* Read a module file in either form: HLO text (starts with "HloModule" after whitespace and
 * comments) goes to hlo_parse_text, anything else to proto_read_module. NULL with an error. */
HModule *proto_load_file(const char *path, HErr *err);

#endif
