/*
  Online rebuild of a table by an in-place ALTER TABLE (ALGORITHM=INPLACE,
  LOCK=NONE): FORCE / ENGINE=TidesDB, column type and NOT NULL changes, primary key
  changes, ADD UNIQUE, changes of generated columns. The engine side
  (ffi/src/rebuild.rs) says why it is correct: a new table filled from a snapshot
  while writers go on, the rows they wrote (logged by the engine) replayed at the
  switch, one catalog transaction for the switch. This side only translates rows:
  old record -> new record with the server's own field conversion (Copy_field, as
  copy_data_between_tables does) and the new definition's generated column
  expressions, new record -> the new table's row and index entries.
*/
#ifndef TIDESDB_ONLINE_REBUILD_H
#define TIDESDB_ONLINE_REBUILD_H

#include "tidesdb_server.h"
#include "external_values.h"
#include "row_codec.h"
#include "tidesdb_ffi.h"
#include <string>
#include <vector>

class ha_tidesdb;

class Online_rebuild {
public:
  ~Online_rebuild();
  /* Why this ALTER cannot rebuild the table online, or nullptr. */
  static const char *refusal(ha_tidesdb *h, TABLE *from, TABLE *to, Alter_inplace_info *info);
  /* The name of a column of table `name` whose values the ALTER changes (type,
     size, character set, sign, scale or NULL-ability) and a FOREIGN KEY constraint
     reads (as the child's column or the parent's referenced one), "" if none,
     nullptr if the constraints cannot be read. */
  static const char *changed_constraint_column(const char *name, TABLE *to,
                                               Alter_inplace_info *info);
  /* The steps of the in-place ALTER (each false on success, with my_error given
     on failure): prepare (the table held exclusively) creates the new table and
     starts the engine's log; build fills it from a snapshot; finish (held
     exclusively again) replays the log and switches. */
  /* sources: per secondary key of the new definition (key order), the engine
     index of the old key it is (1-based), or 0 for a new one. */
  bool prepare(ha_tidesdb *h, TABLE *from, TABLE *to, Alter_inplace_info *info,
               const std::vector<uint32_t> &sources);
  bool build(ha_tidesdb *h, TABLE *from, TABLE *to);
  bool finish(ha_tidesdb *h, TABLE *from, TABLE *to);
  /* One partition of a partitioned table: its handler and its rebuild. */
  struct Part {
    ha_tidesdb *handler;
    Online_rebuild *rebuild;
  };
  /* finish of every partition of partitioned table `path` (its path as the
     server names it, without the partition suffix), held exclusively: each
     log replayed, then one catalog transaction switches them all. */
  static bool finish_group(const std::vector<Part> &parts, TABLE *to, const std::string &path);

private:
  /* What one old row becomes in the new table. */
  struct Derived {
    std::string pk, row;
    std::vector<std::string> keys, values; /* per secondary key of the new table */
    std::vector<bool> unique;
    /* BLOB/TEXT values the new row stores outside it: their bytes point into the
       record's buffers (valid until the next convert). */
    struct External {
      std::string key;
      const uchar *data;
      size_t len;
    };
    std::vector<External> externals;
  };
  /* Decodes old row `row` (row key `pk`; its external values read through trx)
     and converts it into to->record[0], generated columns computed; false (with
     the server's error given) if a value does not convert or, when the row is to
     be put (to_put) and m_check_rows, it fails a CHECK constraint. The records
     point into `row` and m_externals until the next call. */
  bool convert(ha_tidesdb *h, TABLE *from, TABLE *to, tdb_trx *trx, const std::string &pk,
               const std::string &row, bool to_put);
  /* The new table's row and entries of to->record[0]. */
  void derive(TABLE *to, const std::string &old_pk, Derived *out);
  /* Writes / deletes what derive gave; false with the error given. A duplicate
     in a unique key: with dup_key, false with its key number there and no error
     given. */
  bool put(ha_tidesdb *h, TABLE *to, const Derived &d, uint *dup_key = nullptr);
  bool remove(ha_tidesdb *h, TABLE *to, const Derived &d);
  /* Gives the duplicate error of unique key `key` for the snapshot's row `pk`. */
  bool duplicate_error(ha_tidesdb *h, TABLE *from, TABLE *to, const std::string &pk, uint key);
  bool engine_error(ha_tidesdb *h, int st);
  /* Replays the log into the new table (finish without the switch). */
  bool replay(ha_tidesdb *h, TABLE *from, TABLE *to);

  tdb_rebuild *m_build = nullptr;
  tdb_trx *m_snapshot = nullptr; /* the build's snapshot, kept for the replay */
  tidesdb::Row_layout m_new_layout;
  tidesdb::External_state m_externals; /* buffers of the last decoded row's external values */
  Copy_field *m_copies = nullptr; /* per converted column */
  size_t m_n_copies = 0;
  bool m_new_hidden = false;
  bool m_pk_changed = false;
  /* The rows are checked against the CHECK constraints (see online_rebuild.cc). */
  bool m_check_rows = false;
  /* Per key of the new table: its engine index (0 = rows) and covered fields. */
  std::vector<uint> m_engine_index;
  std::vector<std::vector<Field *>> m_covered;
};

#endif
