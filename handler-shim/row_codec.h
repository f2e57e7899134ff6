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

  version 3 (tables whose catalog entry has column definition versions, i.e. every
  table created since they exist; ffi/src/columns.rs): a row names the definition
  version it was written under, and every column can be stepped over without its
  type, so a row is read through its own version whatever columns were added,
  dropped or moved since (instant ALTER, inplace_alter.cc):
    u8   version = 3
    u32  LE column definition version V of the row
    u16  LE number of stored columns N of version V
    null bitmap: (N + 7) / 8 bytes; bit i % 8 of byte i / 8 set = column i is NULL
    then, for each column i of version V (its order) that is not NULL:
         varint (LEB128) byte length L, then L bytes:
           not BLOB/TEXT: Field::pack() of the column
           BLOB/TEXT: tag 0x00 + Field::pack(), or tag 0x01 + u32 LE length
             (external: the value of key <row key> + u16 BE column id in the
             external-value column family)
  The reader maps version V's columns to the fields of its TABLE by column id
  (Row_layout): a column the TABLE does not have (dropped since) is skipped, a
  field the row's version does not have (added since) reads as its default. A
  row keeps its version until it is next written (or OPTIMIZE TABLE rewrites it).
  Versions 1 and 2 stay the format of tables without column versions; for them
  a row written before an instant ADD COLUMN (added last, the only instant column
  change such tables allow) has a smaller N and the null bytes its table had
  then: it is decoded as a row of the current table cut before its (N + 1)-th
  stored column; the added columns read as their defaults.

  A row always carries every stored column of its table version: the handler never sets
  HA_PARTIAL_COLUMN_READ, so UPDATE may rewrite whole rows.
*/
#ifndef TIDESDB_ROW_CODEC_H
#define TIDESDB_ROW_CODEC_H

#include "tidesdb_server.h"
#include <map>
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

/* How the rows of a table name their columns: the table's column definition
   versions (ffi/src/columns.rs) and the column id of each field of one TABLE
   (the open table, or the new definition of an in-place ALTER). Without versions
   (an older table) the rows are of versions 1 / 2 and a column's id is its field
   index. */
class Row_layout {
public:
  static const uint32_t NO_COLUMN = UINT32_MAX;
  struct Column {
    uint32_t id;
    bool blob;
  };
  /* Parses tdb_table_columns' values; false if they are malformed. The TABLE's
     stored fields are the current version's columns, in order. */
  bool load(TABLE *table, const std::vector<uint32_t> &flat);
  /* The layout of `to` (an in-place ALTER's new definition) in version `version`
     with column ids `ids` of its stored fields, the other versions as in `from`. */
  void derive(const Row_layout &from, TABLE *to, uint32_t version, const std::vector<uint32_t> &ids);
  bool versioned() const { return m_versioned; }
  uint32_t version() const { return m_version; }
  /* The column id of field f (its field index for a table without versions). */
  uint32_t column_no(const Field *f) const {
    return m_versioned && f->field_index < m_field_ids.size() ? m_field_ids[f->field_index]
                                                              : f->field_index;
  }
  /* A version's columns, or nullptr if the table has no such version. */
  const std::vector<Column> *columns_of(uint32_t version) const;
  /* Per column of `version`: the index of the field holding it, or NO_COLUMN. */
  const std::vector<uint32_t> *fields_of(uint32_t version) const;
  /* Ids of BLOB/TEXT columns of any version the TABLE does not have. */
  const std::vector<uint32_t> &dropped_blobs() const { return m_dropped_blobs; }

private:
  void index_fields();
  bool m_versioned = false;
  uint32_t m_version = 0;
  std::vector<uint32_t> m_field_ids; /* per field index; NO_COLUMN if not stored */
  std::map<uint32_t, std::vector<Column>> m_versions;
  std::map<uint32_t, std::vector<uint32_t>> m_fields_of; /* per version */
  std::vector<uint32_t> m_dropped_blobs;
};

/* The row version byte and column definition version of a stored row (0 for rows
   of versions 1 / 2); false if too short. */
bool row_definition_version(const std::string &value, uint32_t *version);

/* Serialises record rec of table into out (replacing its content), in the format
   the layout's table writes (version 3 under the layout's version, else 1 / 2). */
void encode_row(TABLE *table, const Row_layout &layout, const uchar *rec, std::string *out,
                Row_externals *ext);

/* Supplies the bytes of external values while a row decodes. */
class External_reader {
public:
  virtual ~External_reader() = default;
  /* Whether column `field` of the row must be read. */
  virtual bool wanted(Field *field) = 0;
  /* The bytes of external column `field` (column id `column_no`, stored length
     `len`), valid until the record is read again; nullptr (with the reason kept by
     the reader) if they cannot be read or their length differs. */
  virtual const uchar *read(Field *field, uint32_t column_no, size_t len) = 0;
};

/* Fills record buf from value. BLOB columns point into value (or into the reader's
   buffers), which must stay alive and unchanged until buf is read again. An
   external column the reader does not want reads as an empty value.
   external_len (resized to the table's field count) receives each column's stored
   external length or NOT_EXTERNAL; orphans the column ids of the row's external
   values whose columns the TABLE does not have (dropped since the row was
   written). Returns false if value is damaged, of a version the layout does not
   know, or an external value could not be read. */
bool decode_row(TABLE *table, const Row_layout &layout, const std::string &value, uchar *buf,
                External_reader *reader, std::vector<int64_t> *external_len,
                std::vector<uint32_t> *orphans);

/* The key of the external value of column `column_no` (Row_layout::column_no) of
   the row with row key `row_key`. */
void external_key(const std::string &row_key, uint32_t column_no, std::string *out);

}  // namespace tidesdb

#endif
