/*
  row_codec: a table row (the server's record buffer) <-> the bytes stored as the
  value in the table's row column family.

  ## Format
  version 1 (tables without BLOB/TEXT columns):
    u8   version = 1
    u16  LE number of stored columns N (virtual columns are not stored)
    null bytes: table->s->null_bytes, copied from the record as they are
    then, for each stored column in column order whose null bit is clear:
         Field::pack() of the column: the server's own compact image
         (VARCHAR: length + bytes; numbers and temporals: their record image)
  version 2 (tables with BLOB/TEXT columns; version 1 rows of such tables, written
  before version 2 existed, still decode):
    as version 1 with version = 2, except that each non-NULL BLOB/TEXT column is
    preceded by a tag byte:
         0x00  inline: Field::pack() follows (length + bytes)
         0x01  external: u32 LE length follows; the bytes are the value of key
               <row key> + u16 BE field index in the table's external-value column
               family (engine index TDB_BLOB_INDEX)
    A BLOB/TEXT value of at least EXTERNAL_BLOB_MIN bytes is stored external, so a
    read that does not need the column (not in read_set, not part of a key) never
    reads it, and an UPDATE that does not change it never rewrites it: like
    InnoDB's off-page columns.

  A row written before an instant ADD COLUMN (inplace_alter.cc) has a smaller N
  and the null bytes its table had then: it is decoded as a row of the current
  table cut before its (N + 1)-th stored column (the added columns come last and
  the others kept their NULL-bit positions); the added columns read as their
  defaults. It keeps that form until it is next written.

  A row always carries every stored column of its table version: the handler never sets
  HA_PARTIAL_COLUMN_READ, so UPDATE may rewrite whole rows.
*/
#ifndef TIDESDB_ROW_CODEC_H
#define TIDESDB_ROW_CODEC_H

#include "tidesdb_server.h"
#include <string>
#include <vector>

namespace tidesdb {

/* BLOB/TEXT values of at least this many bytes are stored outside the row. */
static const size_t EXTERNAL_BLOB_MIN = 4096;
/* external_len[] of a column that is not stored external (inline, NULL, not a BLOB). */
static const int64_t NOT_EXTERNAL = -1;

/* The external BLOB/TEXT columns of one encoded row. */
struct Row_externals {
  /* In: per field index, the stored length of an external value the encoding must
     keep as it is (its bytes are not in the record and not rewritten), or
     NOT_EXTERNAL. Empty = keep nothing. */
  std::vector<int64_t> keep;
  /* Out: the columns this encoding stores external with their bytes (pointing into
     the record's BLOB buffers), to be written by the caller. Kept columns are not
     listed. */
  struct Value {
    uint field;
    const uchar *data;
    size_t len;
  };
  std::vector<Value> written;
};

/* Serialises record rec of table into out (replacing its content). */
void encode_row(TABLE *table, const uchar *rec, std::string *out, Row_externals *ext);

/* Supplies the bytes of external values while a row decodes. */
class External_reader {
public:
  virtual ~External_reader() = default;
  /* Whether column `field` of the row must be read. */
  virtual bool wanted(Field *field) = 0;
  /* The bytes of external column `field` (stored length `len`), valid until the
     record is read again; nullptr (with the reason kept by the reader) if they
     cannot be read or their length differs. */
  virtual const uchar *read(Field *field, size_t len) = 0;
};

/* Fills record buf from value. BLOB columns point into value (or into the reader's
   buffers), which must stay alive and unchanged until buf is read again. An
   external column the reader does not want reads as an empty value.
   external_len (resized to the table's field count) receives each column's stored
   external length or NOT_EXTERNAL. Returns false if value is damaged or an
   external value could not be read. */
bool decode_row(TABLE *table, const std::string &value, uchar *buf, External_reader *reader,
                std::vector<int64_t> *external_len);

/* The key of external column field_index of the row with row key `row_key`. */
void external_key(const std::string &row_key, uint field_index, std::string *out);

}  // namespace tidesdb

#endif
