/*
  external_values: the handler's side of BLOB/TEXT values stored outside the row
  (format in row_codec.h). Reads them back while a row decodes, remembers per record
  buffer which of the row's values are external and which were read, and turns that
  into the engine operations of a row change.
*/
#ifndef TIDESDB_EXTERNAL_VALUES_H
#define TIDESDB_EXTERNAL_VALUES_H

#include "row_codec.h"
#include "tidesdb_ffi.h"
#include <string>
#include <utility>
#include <vector>

namespace tidesdb {

/* A value read with tdb_get_pinned: the engine's own bytes (for a large value the
   block cache's buffer, not a copy), valid and unchanged until this object reads
   another value, is reset or destroyed. Move-only. */
class Pinned_value {
public:
  Pinned_value() = default;
  Pinned_value(const Pinned_value &) = delete;
  Pinned_value &operator=(const Pinned_value &) = delete;
  Pinned_value(Pinned_value &&o) noexcept { swap(o); }
  Pinned_value &operator=(Pinned_value &&o) noexcept {
    swap(o);
    return *this;
  }
  ~Pinned_value() { reset(); }
  /* Reads the value of key in engine index `index` (see tdb_get_pinned); the
     previous value is released (also on an error). */
  int read(tdb_trx *trx, tdb_table *tbl, uint32_t index, const std::string &key, bool latest);
  void reset();
  const uchar *data() const { return m_data; }
  size_t size() const { return m_len; }

private:
  void swap(Pinned_value &o) {
    std::swap(m_pin, o.m_pin);
    std::swap(m_data, o.m_data);
    std::swap(m_len, o.m_len);
  }
  tdb_value *m_pin = nullptr;
  const uchar *m_data = nullptr;
  size_t m_len = 0;
};

/* What the handler knows about the external values of the row last decoded into
   one record buffer. */
struct External_state {
  bool valid = false;
  uint64_t seq = 0;                 /* decode order, to find the most recent */
  std::string row_key;              /* the row these facts are about */
  std::vector<int64_t> length;      /* per field: stored external length or NOT_EXTERNAL */
  std::vector<bool> loaded;         /* per field: its bytes are in the record */
  /* column ids of the row's external values of columns dropped since it was
     written (row_codec's orphans): deleted when the row is written or deleted */
  std::vector<uint32_t> orphans;
  /* per field: the bytes the record points at (the server's Field_blob points
     straight into the engine's buffer, so they live until the next decode into
     this record buffer, as InnoDB's blob heap lives until the next row read) */
  std::vector<Pinned_value> buffers;
};

/* Reads external values through a transaction, for one row. */
class Engine_external_reader : public External_reader {
public:
  /* KEYS: the columns of any key of the table (an index build). */
  enum Want { WANT_NONE, WANT_KEYS, WANT_NEEDED, WANT_ALL };
  Engine_external_reader(tdb_trx *trx, tdb_table *tbl, TABLE *table, const std::string &row_key,
                         bool latest, Want want, External_state *state)
      : m_trx(trx), m_tbl(tbl), m_table(table), m_row_key(row_key), m_latest(latest),
        m_want(want), m_state(state) {}
  /* NEEDED: in read_set or write_set (an UPDATE may copy the old value into the new
     row), or part of any key, FULLTEXT included (index maintenance encodes it; the
     server's part_of_key never lists BLOB columns). */
  bool wanted(Field *field) override;
  const uchar *read(Field *field, uint32_t column_no, size_t len) override;
  /* After a failed read: the engine status (TDB_NOT_FOUND for a missing value) and
     a description. */
  int status = 0;
  std::string error;

private:
  tdb_trx *m_trx;
  tdb_table *m_tbl;
  TABLE *m_table;
  const std::string &m_row_key;
  bool m_latest;
  Want m_want;
  External_state *m_state;
  std::string m_key;
};

/* Whether field is a part of any key of table's share. */
bool field_in_any_key(TABLE *table, Field *field);

/* Reads the bytes of the external value of column column_no (Row_layout::column_no)
   into out (latest committed or snapshot). */
int read_external(tdb_trx *trx, tdb_table *tbl, const std::string &row_key, uint32_t column_no,
                  bool latest, std::string *out);

}  // namespace tidesdb

#endif
