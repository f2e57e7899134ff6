/*
  FULLTEXT indexes: the shim's side (see fulltext.cc). The tokenizer, postings
  format, ranking and query evaluation are in ffi/src/fulltext.rs; here a row's
  indexed columns become a document (bytes) and the server's FT_INFO interface
  becomes calls on a tdb_ft_result.
*/
#ifndef TIDESDB_FULLTEXT_H
#define TIDESDB_FULLTEXT_H

#include "tidesdb_server.h"
#include "tidesdb_ffi.h"
#include <string>

class ha_tidesdb;

namespace tidesdb {
inline bool is_fulltext(const KEY *key) { return key->algorithm == HA_KEY_ALG_FULLTEXT; }
/* The document of record rec for FULLTEXT key `key`: its non-NULL columns converted
   to UTF-8 (utf8mb4), each as u32 little-endian length + bytes. */
void ft_document(TABLE *table, const KEY *key, const uchar *rec, std::string *out);
}  // namespace tidesdb

/* The FT_INFO the server holds for one MATCH ... AGAINST: the vtable first (the
   server calls through `please`), then the query's result. */
struct Tidesdb_ft_info {
  struct _ft_vft *please;
  ha_tidesdb *handler;
  tdb_ft_result *result;
  float relevance; /* of the row ft_read returned last */
};

#endif
