/*
  row_codec: a table row (the server's record buffer) <-> the bytes stored as the
  value in the table's row column family.

  ## Format (version 1)
  u8   version = 1
  u16  LE number of stored columns N (virtual columns are not stored)
  null bytes: table->s->null_bytes, copied from the record as they are
  then, for each stored column in column order whose null bit is clear:
       Field::pack() of the column: the server's own compact image
       (VARCHAR: length + bytes; BLOB/TEXT: length + bytes inline; numbers and
        temporals: their record image)

  A row always carries every stored column: the handler never sets
  HA_PARTIAL_COLUMN_READ, so UPDATE may rewrite whole rows.
*/
#ifndef TIDESDB_ROW_CODEC_H
#define TIDESDB_ROW_CODEC_H

#include "tidesdb_server.h"
#include <string>

namespace tidesdb {

/* Serialises record rec of table into out (replacing its content). */
void encode_row(TABLE *table, const uchar *rec, std::string *out);

/* Fills record buf from value. BLOB columns point into value, which must stay
   alive and unchanged until buf is read again. Returns false if value is damaged. */
bool decode_row(TABLE *table, const std::string &value, uchar *buf);

}  // namespace tidesdb

#endif
