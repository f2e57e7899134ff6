/*
  In-place ALTER TABLE for ha_tidesdb: ADD / DROP / RENAME INDEX and the
  metadata-only changes that leave the stored bytes as they are.

  What runs in place, and how:
  - Metadata only (INSTANT, no lock beyond the server's short exclusive one at the
    commit): RENAME COLUMN, SET/DROP DEFAULT, RENAME INDEX, index comments,
    IGNORED/NOT IGNORED, table COMMENT, RENAME TABLE, DROP INDEX, DROP CONSTRAINT
    ... CHECK, a new expression of a virtual column no index reads. Rows store columns
    by position (row_codec) and index entries carry no names, so none of these
    change a byte; DROP INDEX removes the index from the catalog and drops its
    column family, so its space is reclaimed at once.
  - ADD INDEX of ordinary (non-unique) indexes: NOCOPY and online (LOCK=NONE, the
    default), as InnoDB's: other connections read and write the table while the
    index is built; see "Online ADD INDEX" below.
  - Online rebuild (online_rebuild.cc, ffi/src/rebuild.rs): FORCE, ENGINE=TidesDB,
    column type and NOT NULL changes, ADD / DROP / change of the primary key (INPLACE,
    LOCK=NONE), and ADD UNIQUE or an ADD INDEX in place would build only with writes
    blocked, when it runs with LOCK=NONE (reported NOCOPY, as InnoDB's): a new table
    filled from a snapshot while writers go on, their rows replayed at the switch.
    Generated columns are computed from the new definition, virtual ones for the
    indexes on them; a table with an index on a virtual column is rebuilt with
    writes blocked (LOCK=SHARED, as InnoDB) unless the ALTER only adds indexes.
    What it cannot rebuild (Online_rebuild::refusal: a table FOREIGN KEYs
    reference, FULLTEXT / SPATIAL keys, ADD CONSTRAINT ... CHECK, ...) keeps the
    ways below.
  - ADD UNIQUE (and ADD INDEX with LOCK=SHARED, or in an ALTER that also changes
    columns) with LOCK=SHARED: NOCOPY, the table is not rebuilt; concurrent reads
    go on, concurrent writes wait until the ALTER ends, as for MyRocks. (A UNIQUE
    index stays so: a duplicate must fail the ALTER TABLE, never a concurrent
    write, as in InnoDB.) The build scans the rows through a fresh engine snapshot
    taken after the server blocked writers (and waited for open write transactions
    on the table to end), so the scan sees every row and nothing changes behind
    it: no catch-up is needed. Entries go to new column families no catalog entry
    names yet, in engine transactions of bounded size (ffi/src/index_build.rs). A
    duplicate in a new UNIQUE index stops the build with ER_DUP_ENTRY naming the
    key; the new families are dropped and the table is unchanged.
  - The commit point is one engine transaction replacing the table's catalog entry
    with its new index list (tdb_index_build_commit). A crash before it leaves only
    unnamed families, dropped at the next start.
  - Column changes (INSTANT, as InnoDB's instant ALTER: no row is rewritten):
    on a table with column definition versions (every table created since they
    exist; ffi/src/columns.rs) ADD COLUMN anywhere, DROP COLUMN, moving columns,
    NOT NULL -> NULL of a column outside any key, the first VARCHAR / BLOB of a
    table of fixed-size columns. ADD / DROP / moving a VIRTUAL column (VIRTUAL_COLUMNS)
    changes no version at all: rows hold only stored columns. The prepare derives the next version (each new
    stored column an old one, by position, or new: tdb_index_build_set_columns)
    and the commit installs it with the index list; a row is read through the
    version it was written with (row_codec.h, version 3) until it is next
    written or OPTIMIZE TABLE rewrites it. New columns need a default that is a
    constant of the record image (instant_columns_refusal). A table created
    before versions existed only adds columns last (instant_add_refusal: a row
    keeps the column count it was written with and reads the columns added
    since as their defaults; the old columns must keep their NULL-bit
    positions) until a copying ALTER rebuilds it.
  Online ADD INDEX (ha_alter_info->online):
  - The server runs prepare_inplace_alter_table under an exclusive metadata lock
    (mysql_inplace_alter_table upgrades to MDL_EXCLUSIVE before the prepare for
    every NOCOPY result, then downgrades to MDL_SHARED_UPGRADABLE for LOCK=NONE).
    Taking it waited for every transaction that had used the table to end, and
    no statement uses the table until it is released. The prepare publishes the
    new indexes in the table's Tidesdb_share (and their column families on the
    engine's table, tdb_index_build_publish). So every row change made after the
    prepare is made by a statement that opened the table after the publication,
    and write_row / update_row / delete_row of any handler add the new indexes'
    entries (online_index_ops) in the same engine transaction as the row: no row
    change of a transaction older than the build exists that could miss them.
  - The build (build_indexes_online) walks the rows in batches of ONLINE_BATCH_ROWS
    row keys, each batch from a fresh snapshot. For each row it takes a shared
    lock on the row (as a locking read does: that waits for a transaction holding
    the row, i.e. one that changed it, to end), reads the row's latest committed
    version under the lock and puts that version's entries; it commits the batch
    (releasing the locks) before it goes on. Why the index then holds exactly one
    entry per row, the one of its current version:
    * Rows the build visits: while it holds the lock no one changes the row, so
      the entry it writes is that of the latest version, and any later change
      (which needs the row's exclusive lock, so comes after the batch commits)
      deletes / replaces exactly that entry. A writer that changed the row before
      wrote the same entry for the same version (entries are put, not inserted:
      idempotent). A row deleted before the lock is granted is not found: no
      entry. Entry puts lock their key, so they are checked for write conflicts
      from then on, not from the batch's snapshot (a writer that committed the
      same entry in between is not a conflict).
    * Rows the build does not visit (inserted after the snapshot of the batch
      that covers their key): inserted by a transaction that maintains the
      index, whether it committed (its entry is there) or rolled back (no row,
      no entry).
  - Deadlocks: the build never waits for a lock while it holds one. It tries each
    row lock without waiting (skip-locked); when a writer holds the row, it
    commits what the batch has done, then waits for that lock alone (and goes on
    in a new transaction), checking for KILL every second. A writer waits at most
    for one batch (ONLINE_BATCH_ROWS rows) to commit.
  - The commit (tdb_index_build_commit, under the server's exclusive lock again,
    so no writer is left) names the families in the catalog; the descriptor is
    removed then. A failed build is rolled back by the server WITHOUT the
    exclusive lock: the descriptor is removed first, then the families are
    unpublished (a writer that saw the descriptor just before has its ops on
    them skipped) but not dropped (a writer's transaction may hold writes to
    them); the table's next build, or the next start, drops them.
  - Only non-unique ordinary indexes on stored, non-BLOB columns, in an ALTER that
    changes no column's storage (online_refusal): the writers encode the new
    entries from records of the old definition, so each new key part's column
    must have the same type, length and position in both.

  Everything else (what the online rebuild refuses, columns added with an
  expression default, partitioned tables) is refused here, so the server falls back
  to ALGORITHM=COPY, or reports "ALGORITHM=... is not supported" when the statement
  asked for INPLACE, NOCOPY or INSTANT.
*/
#include "ha_tidesdb.h"
#include "errors.h"
#include "table_options.h"
#include "row_codec.h"
#include "foreign_keys.h"
#include "online_rebuild.h"
#include <algorithm>

using namespace tidesdb;

/* Changes that do not alter a stored byte. */
static const alter_table_operations METADATA_ONLY =
    ALTER_COLUMN_NAME | ALTER_CHANGE_COLUMN_DEFAULT | ALTER_CHANGE_INDEX_COMMENT |
    ALTER_RENAME_INDEX | ALTER_INDEX_IGNORABILITY | ALTER_RENAME | ALTER_INDEX_ORDER |
    ALTER_DROP_NON_UNIQUE_NON_PRIM_INDEX | ALTER_DROP_UNIQUE_INDEX |
    ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE /* only what can_convert_nocopy allows */ |
    /* a CHECK constraint lives in the .frm only; a virtual column's value is never
       stored (the server flags ALTER_COLUMN_VCOL too when an index or the
       partitioning reads it) */
    ALTER_DROP_CHECK_CONSTRAINT | ALTER_VIRTUAL_GCOL_EXPR;

static const alter_table_operations ADD_INDEX =
    ALTER_ADD_NON_UNIQUE_NON_PRIM_INDEX | ALTER_ADD_UNIQUE_INDEX;

/* ADD COLUMN after the last column: instant when instant_add_refusal agrees. A
   column's own CHECK (JSON's JSON_VALID) comes with it; like InnoDB's instant ADD
   COLUMN, rows already there are not checked against it. (A table's CHECK
   constraint, ALTER_ADD_CHECK_CONSTRAINT, is checked on every row by a copy.) */
static const alter_table_operations ADD_COLUMN_LAST = ALTER_ADD_STORED_BASE_COLUMN;

/* FOREIGN KEY constraints are catalog entries: dropping one, or adding one without
   checking the rows (foreign_key_checks=0, which InnoDB requires for an in-place
   ADD too), changes no stored byte. */
static const alter_table_operations FOREIGN_KEYS = ALTER_DROP_FOREIGN_KEY | ALTER_ADD_FOREIGN_KEY;

/* State of one in-place ALTER, kept in ha_alter_info->handler_ctx (the server
   deletes it; an uncommitted build drops its column families then). */
class Tidesdb_alter_ctx : public inplace_alter_handler_ctx {
public:
  tdb_index_build *build = nullptr;
  /* Per secondary index of the new definition, in its key order: see
     tdb_index_build_commit. */
  std::vector<uint32_t> layout;
  /* The new definition's key numbers of the indexes to build, in slot order. */
  std::vector<uint> added;
  /* An online build: the share it published its indexes in (until unpublished). */
  Tidesdb_share *online_share = nullptr;
  bool online = false;
  /* An online rebuild (online_rebuild.cc): everything else is unused then. */
  std::unique_ptr<Online_rebuild> rebuild;
  /* The handler that prepared this context: in a partitioned table, the
     partition's (the first partition's commit switches them all). */
  ha_tidesdb *owner = nullptr;
  /* The new definition's layout, which the build decodes rows through: a new
     column definition version (instant ADD / DROP / reorder / NULL), or the same
     version with the stored fields at other field indexes (a virtual column added,
     dropped or moved before them). */
  bool columns_changed = false;
  Row_layout new_layout;
  /* Removes the published indexes: row changes stop maintaining them. */
  void unpublish() {
    if (!online_share) return;
    std::lock_guard<std::mutex> guard(online_share->online_mutex);
    online_share->online.reset();
    online_share->online_active.store(false, std::memory_order_release);
    online_share = nullptr;
  }
  ~Tidesdb_alter_ctx() override {
    unpublish();
    if (build) tdb_index_build_free(build);
  }
};

/* A VARCHAR made longer keeps its stored bytes: a row stores a VARCHAR as
   Field::pack() does, a length prefix (1 byte up to 255 bytes of column length,
   2 above) and the bytes. So with the same prefix size, character set and
   collation, old rows read as they are, and the ALTER is instant (as on InnoDB).
   Not for key columns: an index entry's encoding depends on the key part's
   length. Anything else (a shorter VARCHAR, another type, NULL-ability) copies. */
bool ha_tidesdb::can_convert_nocopy(const Field &field, const Column_definition &new_type) const {
  if (field.real_type() != MYSQL_TYPE_VARCHAR ||
      new_type.type_handler()->real_field_type() != MYSQL_TYPE_VARCHAR)
    return false;
  if ((field.flags & PART_KEY_FLAG) || field.compression_method() ||
      new_type.compression_method() || new_type.charset != field.charset())
    return false;
  const Field_varstring &old_type = static_cast<const Field_varstring &>(field);
  uint new_prefix = new_type.length > 255 ? 2 : 1;
  return new_type.length >= field.field_length && new_prefix == old_type.length_bytes;
}

/* Offset of a field's NULL bit in its table's record, or -1. */
static long null_offset(TABLE *t, Field *f) { return f->null_ptr ? (long)(f->null_ptr - t->record[0]) : -1; }

static bool same_null_bits(TABLE *a, Field *fa, TABLE *b, Field *fb) {
  if (null_offset(a, fa) != null_offset(b, fb) || fa->null_bit != fb->null_bit) return false;
  if (fa->type() != MYSQL_TYPE_BIT) return true;
  Field_bit *x = (Field_bit *)fa, *y = (Field_bit *)fb;
  return x->bit_len == y->bit_len && x->bit_ofs == y->bit_ofs &&
         (x->bit_len == 0 || x->bit_ptr - a->record[0] == y->bit_ptr - b->record[0]);
}

/* Why columns added by this ALTER cannot be added instantly, or nullptr. Instant
   means no row is rewritten: a row written before reads the new columns as their
   defaults (row_codec's decode_row reads it as a row of the table cut before the
   first new column). So the old columns must keep their order, kind and NULL-bit
   positions, and the new ones must come after them with a default that is a
   constant of the record image (not an expression, not AUTO_INCREMENT). */
static const char *instant_add_refusal(TABLE *from, TABLE *to) {
  uint old_fields = from->s->fields;
  if (to->s->fields <= old_fields) return "TidesDB adds columns in place only after the last one";
  /* A table's first VARCHAR or BLOB drops the record's 'delete marker' bit, which
     moves every NULL bit (see HA_OPTION_PACK_RECORD in sql_table.cc). */
  if ((from->s->db_create_options ^ to->s->db_create_options) & HA_OPTION_PACK_RECORD)
    return "the first VARCHAR or BLOB column of a table moves its NULL bits: TidesDB rewrites "
           "the rows";
  for (uint i = 0; i < old_fields; i++) {
    Field *a = from->field[i], *b = to->field[i];
    if (a->stored_in_db() != b->stored_in_db() || a->real_type() != b->real_type() ||
        a->pack_length() != b->pack_length() || !same_null_bits(from, a, to, b))
      return "TidesDB adds columns in place only after the last one, leaving the others as they are";
  }
  for (uint i = old_fields; i < to->s->fields; i++) {
    Field *f = to->field[i];
    if (!f->stored_in_db() || f->vcol_info)
      return "TidesDB adds generated columns by rebuilding the table";
    if (f->flags & AUTO_INCREMENT_FLAG)
      return "TidesDB numbers the rows of a new AUTO_INCREMENT column by copying the table";
    if (f->default_value || f->unireg_check != Field::NONE)
      return "TidesDB adds a column whose default is an expression by copying the table";
  }
  return nullptr;
}

/* Column changes a table with column definition versions makes without rewriting a
   row (row_codec.h, version 3): a new version maps each row's columns by id. */
static const alter_table_operations INSTANT_COLUMNS =
    ALTER_ADD_STORED_BASE_COLUMN | ALTER_DROP_STORED_COLUMN | ALTER_STORED_COLUMN_ORDER |
    ALTER_COLUMN_NULLABLE;

/* A virtual column is computed from the row on every read and never stored
   (row_codec.h), and a row with column definition versions holds its stored
   columns only, mapped by id (Row_layout::load numbers the stored fields alone):
   adding, dropping or moving one changes no stored byte and no version, so it is
   instant for such a table. Not for an older table: its rows copy the record's NULL
   bytes, in which a virtual column has a NULL bit of its own. An index on an added
   virtual column needs its values computed for every row: the index check below
   leaves that to a rebuild. */
static const alter_table_operations VIRTUAL_COLUMNS =
    ALTER_ADD_VIRTUAL_COLUMN | ALTER_DROP_VIRTUAL_COLUMN | ALTER_VIRTUAL_COLUMN_ORDER;

/* The Create_field of each field of the new definition (the server lists them in
   the new column order; cf->field is the old table's field, or null if new). */
static std::vector<const Create_field *> new_columns(TABLE *to, Alter_inplace_info *info) {
  std::vector<const Create_field *> out;
  List_iterator_fast<Create_field> it(info->alter_info->create_list);
  while (const Create_field *cf = it++) out.push_back(cf);
  if (out.size() != to->s->fields) out.clear();
  return out;
}

/* Why the new definition's stored columns cannot be a new column definition
   version of the old ones, or nullptr: each kept column must decode from its old
   bytes (same type and length, or a VARCHAR grown in place: can_convert_nocopy),
   a column made NULL must not be in a key (the entries' NULL markers), and a new
   column must read as a constant of the record image until its row is written
   (as InnoDB's instant ADD COLUMN: no expression, no AUTO_INCREMENT). */
static const char *instant_columns_refusal(TABLE *from, TABLE *to, Alter_inplace_info *info) {
  std::vector<const Create_field *> cols = new_columns(to, info);
  if (cols.empty()) return "TidesDB: the new columns do not match the statement";
  for (uint i = 0; i < to->s->fields; i++) {
    Field *g = to->field[i];
    Field *f = cols[i]->field;
    if (f && f->table != from) return "TidesDB: the new columns do not match the statement";
    if (!g->stored_in_db() || g->vcol_info) {
      if (!f || !f->stored_in_db()) continue;
      return "TidesDB changes a stored column into a generated one by copying the table";
    }
    if (!f) {
      if (g->flags & AUTO_INCREMENT_FLAG)
        return "TidesDB numbers the rows of a new AUTO_INCREMENT column by copying the table";
      if (g->default_value || g->unireg_check != Field::NONE)
        return "TidesDB adds a column whose default is an expression by copying the table";
      continue;
    }
    if (!f->stored_in_db())
      return "TidesDB makes a generated column stored by copying the table";
    bool grown_varchar = (info->handler_flags & ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE) &&
                         f->real_type() == MYSQL_TYPE_VARCHAR &&
                         g->real_type() == MYSQL_TYPE_VARCHAR &&
                         ((Field_varstring *)f)->length_bytes == ((Field_varstring *)g)->length_bytes;
    if (f->real_type() != g->real_type() || f->charset() != g->charset() ||
        (f->flags & (UNSIGNED_FLAG | BLOB_FLAG)) != (g->flags & (UNSIGNED_FLAG | BLOB_FLAG)) ||
        (!grown_varchar && (f->pack_length() != g->pack_length() ||
                            f->field_length != g->field_length)) ||
        f->decimals() != g->decimals())
      return "TidesDB changes a column's type by copying the table";
    if (f->real_maybe_null() != g->real_maybe_null()) {
      if (!g->real_maybe_null()) return "TidesDB makes a column NOT NULL by copying the table";
      if (f->flags & PART_KEY_FLAG)
        return "TidesDB makes an indexed column NULL by copying the table (its index entries "
               "change)";
    }
  }
  return nullptr;
}

static bool key_has_virtual_part(const KEY *key) {
  for (uint p = 0; p < key->user_defined_key_parts; p++)
    if (key->key_part[p].field && !key->key_part[p].field->stored_in_db()) return true;
  return false;
}

static bool indexed_virtual_column(TABLE *t) {
  for (uint k = 0; k < t->s->keys; k++)
    if (key_has_virtual_part(&t->key_info[k])) return true;
  return false;
}

/* The engine's table options (COMPRESSION, ...) live in the column families'
   options, fixed when they are created: a change of them rebuilds the table. */
static bool engine_options_differ(const TABLE_SHARE *from, const TABLE_SHARE *to) {
  tdb_table_options a, b;
  table_options_of(from, &a);
  table_options_of(to, &b);
  return memcmp(&a, &b, sizeof a) != 0;
}

/* Field f of table `from` and field g of table `to` are stored alike: same type,
   length, character set, NULL-ability and place in the record. */
static bool same_storage(TABLE *from, Field *f, TABLE *to, Field *g) {
  return f->real_type() == g->real_type() && f->pack_length() == g->pack_length() &&
         f->field_length == g->field_length && f->charset() == g->charset() &&
         f->key_length() == g->key_length() &&
         (f->flags & (UNSIGNED_FLAG | BLOB_FLAG)) == (g->flags & (UNSIGNED_FLAG | BLOB_FLAG)) &&
         f->ptr - from->record[0] == g->ptr - to->record[0] && same_null_bits(from, f, to, g) &&
         f->stored_in_db() && g->stored_in_db();
}

/* Why the indexes this ALTER adds cannot be built while other connections write
   (LOCK=NONE), or nullptr. Concurrent writers add the new entries themselves,
   encoding them from records of the old definition (online_index_ops), so every
   column an entry holds must be stored alike in both definitions; a BLOB/TEXT
   column is left out as a row read decodes it only when a key of the old
   definition (or the statement) needs it. */
static const char *online_refusal(TABLE *from, TABLE *to, Alter_inplace_info *info,
                                  bool hidden_pk) {
  alter_table_operations flags = info->handler_flags;
  if (flags & ALTER_ADD_UNIQUE_INDEX)
    return "TidesDB blocks writes while it builds a UNIQUE index (reads go on)";
  /* (A virtual column added, dropped or moved changes the field numbers the key
     parts name.) */
  if ((flags & (ADD_COLUMN_LAST | ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE | ALTER_ADD_FOREIGN_KEY |
                VIRTUAL_COLUMNS)) ||
      from->s->fields != to->s->fields || from->s->reclength != to->s->reclength ||
      from->s->null_bytes != to->s->null_bytes)
    return "TidesDB blocks writes while it builds an index in an ALTER TABLE that also "
           "changes columns (reads go on)";
  for (uint i = 0; i < info->index_add_count; i++) {
    uint k = info->index_add_buffer[i];
    std::vector<Field *> covered;
    covered_fields(to, k, hidden_pk, &covered);
    const KEY *key = &to->key_info[k];
    for (uint p = 0; p < key->user_defined_key_parts; p++)
      covered.push_back(to->field[key->key_part[p].fieldnr - 1]);
    for (Field *g : covered) {
      if (g->flags & BLOB_FLAG)
        return "TidesDB blocks writes while it builds an index on a BLOB or TEXT column "
               "(reads go on)";
      if (!same_storage(from, from->field[g->field_index], to, g))
        return "TidesDB blocks writes while it builds an index in an ALTER TABLE that also "
               "changes columns (reads go on)";
    }
  }
  return nullptr;
}

/* In place without a rebuild where in_place_support says so; otherwise an online
   rebuild (online_rebuild.cc) where it can: for what must rewrite rows (reported
   as a rebuild, INPLACE), and for what in place would do only with writes blocked
   (an ADD UNIQUE: reported NOCOPY, as InnoDB's, and rebuilt only for LOCK=NONE). */
enum_alter_inplace_result ha_tidesdb::check_if_supported_inplace_alter(
    TABLE *altered_table, Alter_inplace_info *ha_alter_info) {
  m_rebuild_planned = false;
  enum_alter_inplace_result r = in_place_support(altered_table, ha_alter_info);
  if (r != HA_ALTER_INPLACE_NOT_SUPPORTED && r != HA_ALTER_INPLACE_NOCOPY_LOCK) return r;
  /* The new engine options would need new column families of their own kind. */
  if (engine_options_differ(table->s, altered_table->s)) return r;
  if (const char *why = Online_rebuild::refusal(this, table, altered_table, ha_alter_info)) {
    /* In place refused the kind of change (not a detail of it): say what the
       rebuild refused. (A virtual column comes with a UNIQUE key of a BLOB, the
       server's hash: its refusal is the rebuild's.) */
    alter_table_operations in_place = METADATA_ONLY | ADD_INDEX | ALTER_CHANGE_CREATE_OPTION |
                                      FOREIGN_KEYS |
                                      (m_layout.versioned() ? INSTANT_COLUMNS : ADD_COLUMN_LAST);
    if (r == HA_ALTER_INPLACE_NOT_SUPPORTED && (ha_alter_info->handler_flags & ~in_place))
      ha_alter_info->unsupported_reason = why;
    return r;
  }
  m_rebuild_planned = true;
  m_rebuild_only_if_online = r == HA_ALTER_INPLACE_NOCOPY_LOCK;
  if (m_rebuild_only_if_online) return HA_ALTER_INPLACE_NOCOPY_NO_LOCK;
  /* As InnoDB: a rebuild (an ALTER that does more than add indexes) of a table
     with an index on a virtual column blocks writes, with InnoDB's reason. */
  if ((ha_alter_info->handler_flags & ~(METADATA_ONLY | ADD_INDEX)) &&
      indexed_virtual_column(altered_table)) {
    if (ha_alter_info->online)
      ha_alter_info->unsupported_reason = "online rebuild with indexed virtual columns";
    return HA_ALTER_INPLACE_COPY_LOCK;
  }
  return HA_ALTER_INPLACE_COPY_NO_LOCK;
}

enum_alter_inplace_result ha_tidesdb::in_place_support(TABLE *altered_table,
                                                       Alter_inplace_info *ha_alter_info) {
  alter_table_operations flags = ha_alter_info->handler_flags;
  bool versioned = m_layout.versioned();
  alter_table_operations columns = versioned ? INSTANT_COLUMNS | VIRTUAL_COLUMNS : ADD_COLUMN_LAST;
  if (flags & ~(METADATA_ONLY | ADD_INDEX | columns | ALTER_CHANGE_CREATE_OPTION | FOREIGN_KEYS)) {
    ha_alter_info->unsupported_reason =
        versioned ? "TidesDB changes in place only indexes (not primary keys), metadata and "
                    "columns added, dropped, moved or made NULL"
                  : "TidesDB changes in place only indexes (not primary keys), metadata and "
                    "columns added last (a table created by an older TidesDB: ALTER TABLE ... "
                    "FORCE once makes the other column changes instant)";
    return HA_ALTER_INPLACE_NOT_SUPPORTED;
  }
  if (flags & ALTER_ADD_FOREIGN_KEY) {
    /* With checks on, the rows must be checked: a copy does that (as InnoDB's). */
    if (!thd_test_options(ha_thd(), OPTION_NO_FOREIGN_KEY_CHECKS)) {
      ha_alter_info->unsupported_reason =
          my_get_err_msg(ER_ALTER_OPERATION_NOT_SUPPORTED_REASON_FK_CHECK);
      return HA_ALTER_INPLACE_NOT_SUPPORTED;
    }
    /* The new constraint is validated against the recorded keys and columns at
       commit, before anything else is: so nothing else may change them. (The
       server flags ALTER_INDEX_ORDER with any new constraint.) */
    if (flags & ~(FOREIGN_KEYS | ALTER_INDEX_ORDER)) {
      ha_alter_info->unsupported_reason =
          "TidesDB adds a FOREIGN KEY in place only in an ALTER TABLE that does nothing else";
      return HA_ALTER_INPLACE_NOT_SUPPORTED;
    }
  }
  /* Constraints find indexes by their columns: a table in a constraint drops
     indexes (or changes the type of a column a constraint reads) by copying, where
     the server and the engine check the constraints against the new definition.
     (RENAME COLUMN stays in place: the constraint catalog follows at commit, as
     InnoDB's does.) */
  if ((flags & (ALTER_DROP_NON_UNIQUE_NON_PRIM_INDEX | ALTER_DROP_UNIQUE_INDEX |
                ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE)) &&
      (referenced_by_foreign_key() || !can_switch_engines())) {
    bool drops = flags & (ALTER_DROP_NON_UNIQUE_NON_PRIM_INDEX | ALTER_DROP_UNIQUE_INDEX);
    const char *col =
        drops ? nullptr
              : Online_rebuild::changed_constraint_column(m_name.c_str(), altered_table,
                                                          ha_alter_info);
    if (!col || *col) {
      ha_alter_info->unsupported_reason =
          "TidesDB drops indexes and changes columns FOREIGN KEY constraints read by "
          "copying the table";
      return HA_ALTER_INPLACE_NOT_SUPPORTED;
    }
  }
  if (versioned && (flags & (INSTANT_COLUMNS | ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE))) {
    if (const char *why = instant_columns_refusal(table, altered_table, ha_alter_info)) {
      ha_alter_info->unsupported_reason = why;
      return HA_ALTER_INPLACE_NOT_SUPPORTED;
    }
  } else if (flags & ADD_COLUMN_LAST) {
    if (const char *why = instant_add_refusal(table, altered_table)) {
      ha_alter_info->unsupported_reason = why;
      return HA_ALTER_INPLACE_NOT_SUPPORTED;
    }
  }
  /* A changed table option other than the comment may need the rows rewritten
     (or the catalog's AUTO_INCREMENT option updated): copy. */
  if ((flags & ALTER_CHANGE_CREATE_OPTION) &&
      ((ha_alter_info->create_info->used_fields & ~(ulong)HA_CREATE_USED_COMMENT) ||
       engine_options_differ(table->s, altered_table->s))) {
    ha_alter_info->unsupported_reason = "TidesDB changes in place only the table COMMENT";
    return HA_ALTER_INPLACE_NOT_SUPPORTED;
  }
  /* The primary key (also one the server promotes from a UNIQUE NOT NULL key) is
     the rows' key: it stays as it is. */
  bool old_hidden = table->s->primary_key >= MAX_KEY;
  bool new_hidden = altered_table->s->primary_key >= MAX_KEY;
  if (old_hidden != new_hidden ||
      (!old_hidden && strcmp(table->key_info[table->s->primary_key].name.str,
                             altered_table->key_info[altered_table->s->primary_key].name.str))) {
    ha_alter_info->unsupported_reason = "TidesDB rebuilds the table to change its primary key";
    return HA_ALTER_INPLACE_NOT_SUPPORTED;
  }
  if (m_share == nullptr || table->s->partition_info_str_len || table->part_info) {
    ha_alter_info->unsupported_reason = "TidesDB changes partitioned tables by copying them";
    return HA_ALTER_INPLACE_NOT_SUPPORTED;
  }
  if (!(flags & ADD_INDEX)) return HA_ALTER_INPLACE_INSTANT;
  /* ALTER IGNORE ... ADD UNIQUE drops the duplicate rows: only a copy does that. */
  if (ha_alter_info->ignore && (flags & ALTER_ADD_UNIQUE_INDEX)) {
    ha_alter_info->unsupported_reason = "ALTER IGNORE removes duplicates by copying the table";
    return HA_ALTER_INPLACE_NOT_SUPPORTED;
  }
  for (uint i = 0; i < ha_alter_info->index_add_count; i++) {
    uint k = ha_alter_info->index_add_buffer[i];
    const KEY *key = &ha_alter_info->key_info_buffer[k];
    /* The build decodes stored columns only: a virtual one's values are computed by
       a rebuild. (The key_info_buffer's parts name no Field: the new table's do.) */
    if (tidesdb_compat::key_is_fulltext(key) || tidesdb_compat::key_is_spatial(key) || key->algorithm == HA_KEY_ALG_LONG_HASH ||
        key_has_virtual_part(&altered_table->key_info[k])) {
      ha_alter_info->unsupported_reason =
          "TidesDB builds in place only ordinary indexes on stored columns";
      return HA_ALTER_INPLACE_NOT_SUPPORTED;
    }
  }
  if (const char *why = online_refusal(table, altered_table, ha_alter_info, m_hidden_pk)) {
    ha_alter_info->unsupported_reason = why;
    return HA_ALTER_INPLACE_NOCOPY_LOCK;
  }
  return HA_ALTER_INPLACE_NOCOPY_NO_LOCK;
}

/* The old definition's key number of the new key new_key, or MAX_KEY if it is new. */
static uint old_key_of(TABLE *table, Alter_inplace_info *info, const KEY *new_key) {
  for (const auto &pair : info->rename_keys)
    if (pair.new_key == new_key) return (uint)(pair.old_key - table->key_info);
  for (uint i = 0; i < info->index_add_count; i++)
    if (&info->key_info_buffer[info->index_add_buffer[i]] == new_key) return MAX_KEY;
  for (uint k = 0; k < table->s->keys; k++) {
    const KEY *old = &table->key_info[k];
    bool dropped = false;
    for (uint d = 0; d < info->index_drop_count; d++) dropped |= info->index_drop_buffer[d] == old;
    if (!dropped && tidesdb_compat::ident_eq(old->name.str, new_key->name.str))
      return k;
  }
  return MAX_KEY;
}

bool ha_tidesdb::prepare_inplace_alter_table(TABLE *altered_table,
                                             Alter_inplace_info *ha_alter_info) {
  if ((ha_alter_info->handler_flags & ALTER_ADD_FOREIGN_KEY) && fk_refuse_unsupported(ha_thd()))
    return true;
  auto *ctx = new Tidesdb_alter_ctx(); /* Sql_alloc: on the statement's memory root */
  if (!ctx) {
    my_error(ER_OUT_OF_RESOURCES, MYF(0));
    return true;
  }
  ha_alter_info->handler_ctx = ctx;
  ctx->owner = this;
  /* The new definition's secondary indexes, in its key order (the engine index
     numbering of the reopened table). */
  uint new_pk = altered_table->s->primary_key;
  for (uint k = 0; k < ha_alter_info->key_count; k++) {
    if (k == new_pk) continue;
    const KEY *key = &ha_alter_info->key_info_buffer[k];
    uint old = old_key_of(table, ha_alter_info, key);
    if (old == MAX_KEY) {
      ctx->layout.push_back(TDB_LAYOUT_BUILT | (uint32_t)ctx->added.size());
      ctx->added.push_back(k);
    } else if (is_pk(old) && m_rebuild_planned) {
      ctx->layout.push_back(TDB_LAYOUT_BUILT | (uint32_t)ctx->added.size());
      ctx->added.push_back(k);
    } else if (is_pk(old)) {
      my_error(ER_INTERNAL_ERROR, MYF(0), "TidesDB: a secondary key maps to the primary key");
      return true;
    } else {
      ctx->layout.push_back(engine_index(old));
    }
  }
  /* A parent's new UNIQUE key may come before the key a constraint resolves to
     and take its place: the switch waits for the children's checks holding
     locks in the old families (Rebuild::commit_group, and IndexBuild::commit
     where a table that cannot be rebuilt builds it in place), so a parent that
     can be rebuilt takes it by a rebuild with writes blocked too. */
  bool parent_unique = m_rebuild_planned &&
                       (ha_alter_info->handler_flags & ALTER_ADD_UNIQUE_INDEX) &&
                       referenced_by_foreign_key();
  if (m_rebuild_planned &&
      (ha_alter_info->online || !m_rebuild_only_if_online || parent_unique)) {
    /* The old keys the new ones are (a key the old primary key becomes is new). */
    std::vector<uint32_t> sources;
    for (uint32_t l : ctx->layout) sources.push_back(l & TDB_LAYOUT_BUILT ? 0 : l);
    ctx->layout.clear();
    ctx->added.clear();
    ctx->rebuild.reset(new Online_rebuild());
    return ctx->rebuild->prepare(this, table, altered_table, ha_alter_info, sources);
  }
  /* A prepared XA transaction whose connection went away holds no metadata lock:
     the server's exclusive lock did not wait for it, and its XA COMMIT could
     later add rows (or row versions) the build never saw, without entries in the
     new indexes. (Under the exclusive lock every other transaction that wrote the
     table has ended, so a prepared write to its rows is one of those.) */
  if (!ctx->added.empty() && tdb_table_has_prepared_writes(m_tbl)) {
    my_printf_error(ER_LOCK_WAIT_TIMEOUT,
                    "TidesDB: a prepared XA transaction (see XA RECOVER) changed rows of the "
                    "table: XA COMMIT or XA ROLLBACK it before adding an index",
                    MYF(0));
    return true;
  }
  int st = tdb_index_build_begin(m_name.c_str(), (uint32_t)ctx->added.size(), &ctx->build);
  if (st) {
    ctx->build = nullptr;
    print_error(fail(st), MYF(0));
    return true;
  }
  /* A new column definition version, committed with the index list: each stored
     column of the new definition is an old one (its position among the old stored
     columns) or new. */
  if (m_layout.versioned() && (ha_alter_info->handler_flags &
                               (INSTANT_COLUMNS | ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE))) {
    std::vector<const Create_field *> cols = new_columns(altered_table, ha_alter_info);
    std::vector<uint32_t> old_position(table->s->fields, TDB_NEW_COLUMN);
    uint32_t pos = 0;
    for (Field **fp = table->field; *fp; fp++)
      if ((*fp)->stored_in_db()) old_position[(*fp)->field_index] = pos++;
    std::vector<uint32_t> sources, ids;
    std::vector<uint8_t> col_flags;
    for (uint i = 0; i < altered_table->s->fields && i < cols.size(); i++) {
      Field *g = altered_table->field[i];
      if (!g->stored_in_db()) continue;
      Field *f = cols[i]->field;
      sources.push_back(f ? old_position[f->field_index] : TDB_NEW_COLUMN);
      col_flags.push_back(g->flags & BLOB_FLAG ? TDB_COLUMN_BLOB : 0);
    }
    ids.resize(sources.size());
    uint32_t version = 0;
    if ((st = tdb_index_build_set_columns(ctx->build, sources.data(), col_flags.data(),
                                          sources.size(), ids.data(), &version))) {
      print_error(fail(st), MYF(0));
      return true;
    }
    ctx->new_layout.derive(m_layout, altered_table, version, ids);
    ctx->columns_changed = true;
  } else if (m_layout.versioned() && (ha_alter_info->handler_flags & VIRTUAL_COLUMNS)) {
    std::vector<uint32_t> ids;
    for (Field **fp = table->field; *fp; fp++)
      if ((*fp)->stored_in_db()) ids.push_back(m_layout.column_no(*fp));
    ctx->new_layout.derive(m_layout, altered_table, m_layout.version(), ids);
    ctx->columns_changed = true;
  }
  /* Online: publish the new indexes now, while the server holds the exclusive
     metadata lock (see "Online ADD INDEX" above). */
  if (ha_alter_info->online && !ctx->added.empty()) {
    if ((st = tdb_index_build_publish(ctx->build))) {
      print_error(fail(st), MYF(0));
      return true;
    }
    auto published = std::make_shared<Tidesdb_online_build>();
    for (size_t i = 0; i < ctx->added.size(); i++) {
      const KEY &key = altered_table->key_info[ctx->added[i]];
      Tidesdb_online_index d;
      d.key = key;
      d.key.key_part = nullptr; /* each handler points it at its own copy */
      /* The user-defined parts, then any extended ones (the primary key's, when
         the server extends keys), as the new definition's KEY has them. */
      d.parts.assign(key.key_part,
                     key.key_part + std::max(key.user_defined_key_parts, key.ext_key_parts));
      std::vector<Field *> covered;
      covered_fields(altered_table, ctx->added[i], m_hidden_pk, &covered);
      for (Field *f : covered) d.covered.push_back(f->field_index);
      d.slot = (uint32_t)i;
      published->push_back(std::move(d));
    }
    {
      std::lock_guard<std::mutex> guard(m_share->online_mutex);
      m_share->online = std::move(published);
      m_share->online_active.store(true, std::memory_order_release);
    }
    ctx->online_share = m_share;
    ctx->online = true;
  }
  return false;
}

/* The ops a row change adds for the indexes being built online (published in the
   share by prepare_inplace_alter_table): the same rules as write_row / update_row
   / delete_row apply to their own non-unique entries. Entries live in m_online
   until the next row change. */
void ha_tidesdb::online_index_ops(const uchar *old_rec, const std::string *old_pk,
                                  const uchar *new_rec, const std::string *new_pk,
                                  std::vector<tdb_op> *ops, std::vector<uint> *op_keys) {
  std::shared_ptr<const Tidesdb_online_build> src;
  {
    std::lock_guard<std::mutex> guard(m_share->online_mutex);
    src = m_share->online;
  }
  if (src != m_online_src) {
    /* This handler's copy, with the key parts naming its own TABLE's fields (the
       columns are stored alike in both definitions: online_refusal). */
    m_online.clear();
    m_online.resize(src ? src->size() : 0);
    for (size_t i = 0; i < m_online.size(); i++) {
      const Tidesdb_online_index &d = (*src)[i];
      Online_key &k = m_online[i];
      k.key = d.key;
      k.parts = d.parts;
      for (KEY_PART_INFO &kp : k.parts) kp.field = table->field[kp.fieldnr - 1];
      k.key.key_part = k.parts.data();
      for (uint f : d.covered) k.covered.push_back(table->field[f]);
      k.slot = d.slot;
    }
    m_online_src = src;
  }
  auto op = [&](uint32_t slot, uint32_t kind, uint32_t lock, const Index_entry &e) {
    uint32_t index = TDB_BUILDING_INDEX | slot;
    tdb_op o = kind == TDB_OP_PUT ? put_op(index, e.key, e.value, 0) : delete_op(index, e.key);
    o.lock = lock;
    ops->push_back(o);
    op_keys->push_back(MAX_KEY);
  };
  for (Online_key &k : m_online) {
    if (old_rec) encode_entry(table, &k.key, k.covered, old_rec, *old_pk, &k.old_e);
    if (new_rec) encode_entry(table, &k.key, k.covered, new_rec, *new_pk, &k.new_e);
    if (old_rec && new_rec) {
      if (k.old_e == k.new_e) continue;
      if (k.old_e.key != k.new_e.key) op(k.slot, TDB_OP_DELETE, 1, k.old_e);
      op(k.slot, TDB_OP_PUT, 1, k.new_e);
    } else if (new_rec) {
      /* A new row's entry: written under the row's lock (the first op). */
      op(k.slot, TDB_OP_PUT, 0, k.new_e);
    } else {
      op(k.slot, TDB_OP_DELETE, 1, k.old_e);
    }
  }
}

bool ha_tidesdb::inplace_alter_table(TABLE *altered_table, Alter_inplace_info *ha_alter_info) {
  auto *ctx = static_cast<Tidesdb_alter_ctx *>(ha_alter_info->handler_ctx);
  if (ctx && ctx->rebuild) return ctx->rebuild->build(this, table, altered_table);
  if (!ctx || ctx->added.empty()) return false;
  return ctx->online ? build_indexes_online(altered_table, ha_alter_info)
                     : build_indexes(altered_table, ha_alter_info);
}

/* Row keys an online build reads, locks and indexes per engine transaction: a
   writer of one of them waits at most for one such batch. */
static const size_t ONLINE_BATCH_ROWS = 1000;

/* How long the build waits for a row lock before checking for KILL. */
static const uint64_t ONLINE_LOCK_POLL_MS = 1000;

/* Decodes stored row `row` (primary key pk) into altered_table's record rec for an
   index build, reading the external BLOB/TEXT values the new keys need (latest: the
   latest committed ones, else the transaction's snapshot). False with my_error given. */
static bool decode_for_build(tdb_trx *t, tdb_table *tbl, TABLE *altered_table,
                             const Row_layout &layout, const std::string &row,
                             const std::string &pk, bool latest, External_state *external,
                             uchar *rec) {
  external->loaded.assign(altered_table->s->fields, false);
  Engine_external_reader reader(t, tbl, altered_table, pk, latest,
                                Engine_external_reader::WANT_KEYS, external);
  if (decode_row(altered_table, layout, row, rec, &reader, nullptr, nullptr)) return true;
  my_error(ER_INTERNAL_ERROR, MYF(0),
           reader.status ? reader.error.c_str() : "TidesDB: a stored row does not decode");
  return false;
}

bool ha_tidesdb::build_indexes_online(TABLE *altered_table, Alter_inplace_info *ha_alter_info) {
  auto *ctx = static_cast<Tidesdb_alter_ctx *>(ha_alter_info->handler_ctx);
  THD *thd = ha_thd();
  std::vector<std::vector<Field *>> covered(ctx->added.size());
  for (size_t i = 0; i < ctx->added.size(); i++)
    covered_fields(altered_table, ctx->added[i], m_hidden_pk, &covered[i]);
  uchar *rec = altered_table->record[0];
  std::string row, last_pk;
  bool started = false, at_end = false, failed = false;
  std::vector<std::string> keys;
  std::deque<Index_entry> entries; /* stable addresses: the ops point into them */
  std::vector<tdb_op> ops;
  External_state external;
  ha_rows done = 0, total = stats.records;
  tdb_trx *t = nullptr;
  int st = TDB_OK;

  auto begin = [&]() -> int {
    t = tdb_trx_new();
    if (!t) return TDB_INTERNAL;
    int s = tdb_trx_begin(t, TDB_ISO_READ_COMMITTED); /* no gap locks */
    return s ? s : tdb_trx_set_lock_wait_timeout(t, ONLINE_LOCK_POLL_MS);
  };
  /* Puts the entries gathered (in key order: each lands next to the previous one),
     commits and so releases the row locks. */
  auto finish = [&]() -> int {
    int s = TDB_OK;
    if (!ops.empty()) {
      std::sort(ops.begin(), ops.end(), [](const tdb_op &a, const tdb_op &b) {
        if (a.index != b.index) return a.index < b.index;
        int c = memcmp(a.key, b.key, std::min(a.key_len, b.key_len));
        return c ? c < 0 : a.key_len < b.key_len;
      });
      size_t failed_op = 0;
      s = tdb_apply(t, m_tbl, ops.data(), ops.size(), &failed_op);
    }
    if (!s) s = tdb_trx_commit(t);
    tdb_trx_free(t); /* rolls back what did not commit */
    t = nullptr;
    ops.clear();
    entries.clear();
    return s;
  };

  Build_pacer pacer(thd);
  thd_progress_init(thd, 1);
  while (!failed && !at_end && st == TDB_OK) {
    /* Between batches: the build holds no row lock while it waits. */
    if (!pacer.pace(done)) {
      my_error(ER_QUERY_INTERRUPTED, MYF(0));
      failed = true;
      break;
    }
    /* The next row keys, from a fresh snapshot. */
    if ((st = begin())) break;
    keys.clear();
    tdb_cursor *c = nullptr;
    st = tdb_cursor_open(t, m_tbl, 0, &c);
    if (!st)
      st = started ? tdb_cursor_seek(c, TDB_SEEK_GE, (const uint8_t *)last_pk.data(), last_pk.size())
                   : tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0);
    for (; st == TDB_OK && keys.size() < ONLINE_BATCH_ROWS; st = tdb_cursor_next(c)) {
      const uint8_t *k, *v;
      size_t klen, vlen;
      if ((st = tdb_cursor_entry(c, &k, &klen, &v, &vlen))) break;
      if (started && klen == last_pk.size() && !memcmp(k, last_pk.data(), klen)) continue;
      keys.emplace_back((const char *)k, klen);
    }
    if (c) tdb_cursor_close(c);
    if (st == TDB_END) {
      at_end = true;
      st = TDB_OK;
    }
    if (st) break;
    for (const std::string &pk : keys) {
      if (thd_killed(thd)) {
        my_error(ER_QUERY_INTERRUPTED, MYF(0));
        failed = true;
        break;
      }
      const uint8_t *v;
      size_t vlen;
      tdb_trx_set_skip_locked(t, 1);
      int ls = tdb_lock_row(t, m_tbl, (const uint8_t *)pk.data(), pk.size(), TDB_LOCK_SHARED, &v,
                            &vlen);
      tdb_trx_set_skip_locked(t, 0);
      if (ls == TDB_LOCK_TIMEOUT) {
        /* A writer holds the row: finish the batch so far, then wait holding no
           lock (no deadlock can involve the build). */
        if ((st = finish()) || (st = begin())) break;
        while ((ls = tdb_lock_row(t, m_tbl, (const uint8_t *)pk.data(), pk.size(),
                                  TDB_LOCK_SHARED, &v, &vlen)) == TDB_LOCK_TIMEOUT &&
               !thd_killed(thd)) {
        }
        if (ls == TDB_LOCK_TIMEOUT) {
          my_error(ER_QUERY_INTERRUPTED, MYF(0));
          failed = true;
          break;
        }
      }
      if (ls == TDB_NOT_FOUND) continue; /* deleted meanwhile: nothing to index */
      if (ls) {
        st = ls;
        break;
      }
      row.assign((const char *)v, vlen);
      if (!decode_for_build(t, m_tbl, altered_table, m_layout, row, pk, true, &external, rec)) {
        failed = true;
        break;
      }
      for (size_t i = 0; i < ctx->added.size(); i++) {
        entries.emplace_back();
        Index_entry &e = entries.back();
        encode_entry(altered_table, ctx->added[i], covered[i], rec, pk, &e);
        /* Locked: conflict-checked from the lock on, not from the snapshot. */
        ops.push_back(put_op(TDB_BUILDING_INDEX | (uint32_t)i, e.key, e.value, 0));
      }
      if (++done % 1024 == 0) thd_progress_report(thd, done, total > done ? total : done);
    }
    if (!failed && !st) st = finish();
    if (!failed && (st == TDB_LOCK_TIMEOUT || st == TDB_DEADLOCK || st == TDB_CONFLICT)) {
      /* While it holds row locks the build waits only for the locks of its own
         entries, which a writer holds only if it escalated its locks on a built
         family to a table lock: that wait timed out (ONLINE_LOCK_POLL_MS) or was a
         deadlock. Drop the batch and do it again (its puts are idempotent). */
      if (t) tdb_trx_free(t);
      t = nullptr;
      ops.clear();
      entries.clear();
      at_end = false;
      st = TDB_OK;
      continue;
    }
    if (failed || st) break;
    if (!keys.empty()) {
      last_pk = keys.back();
      started = true;
    }
  }
  thd_progress_end(thd);
  if (t) tdb_trx_free(t);
  if (!failed && st) {
    print_error(fail(st), MYF(0));
    failed = true;
  }
  return failed;
}

bool ha_tidesdb::build_indexes(TABLE *altered_table, Alter_inplace_info *ha_alter_info) {
  auto *ctx = static_cast<Tidesdb_alter_ctx *>(ha_alter_info->handler_ctx);
  THD *thd = ha_thd();
  /* A snapshot of its own, taken now: writers are blocked, so it holds every row. */
  tdb_trx *t = tdb_trx_new();
  tdb_cursor *c = nullptr;
  int st = t ? tdb_trx_begin(t, TDB_ISO_REPEATABLE_READ) : TDB_INTERNAL;
  if (!st) st = tdb_cursor_open(t, m_tbl, 0, &c);
  std::vector<std::vector<Field *>> covered(ctx->added.size());
  for (size_t i = 0; i < ctx->added.size(); i++)
    covered_fields(altered_table, ctx->added[i], m_hidden_pk, &covered[i]);
  uchar *rec = altered_table->record[0];
  std::string row, pk;
  External_state external; /* external values of the row being indexed */
  Index_entry e;
  ha_rows done = 0, total = stats.records;
  bool failed = false;
  thd_progress_init(thd, 1);
  if (!st) st = tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0);
  for (; st == TDB_OK && !failed; st = tdb_cursor_next(c)) {
    if (thd_killed(thd)) {
      my_error(ER_QUERY_INTERRUPTED, MYF(0));
      failed = true;
      break;
    }
    const uint8_t *k, *v;
    size_t klen, vlen;
    if ((st = tdb_cursor_entry(c, &k, &klen, &v, &vlen))) break;
    row.assign((const char *)v, vlen);
    pk.assign((const char *)k, klen);
    if (!decode_for_build(t, m_tbl, altered_table,
                          ctx->columns_changed ? ctx->new_layout : m_layout, row, pk, false,
                          &external, rec)) {
      failed = true;
      break;
    }
    for (size_t i = 0; i < ctx->added.size() && !failed; i++) {
      encode_entry(altered_table, ctx->added[i], covered[i], rec, pk, &e);
      int pst = tdb_index_build_put(ctx->build, (uint32_t)i, (const uint8_t *)e.key.data(),
                                    e.key.size(), (const uint8_t *)e.value.data(),
                                    e.value.size(), e.unique);
      if (pst == TDB_DUPLICATE) {
        /* The row just decoded holds the duplicate value: name it as InnoDB does. */
        print_keydup_error(altered_table, &altered_table->key_info[ctx->added[i]], MYF(0));
        failed = true;
      } else if (pst) {
        print_error(fail(pst), MYF(0));
        failed = true;
      }
    }
    if (++done % 1024 == 0) thd_progress_report(thd, done, total > done ? total : done);
  }
  thd_progress_end(thd);
  if (c) tdb_cursor_close(c);
  if (t) tdb_trx_free(t);
  if (!failed && st != TDB_END) {
    print_error(fail(st), MYF(0));
    failed = true;
  }
  return failed;
}

bool ha_tidesdb::commit_inplace_alter_table(TABLE *altered_table, Alter_inplace_info *ha_alter_info,
                                            bool commit) {
  auto *ctx = static_cast<Tidesdb_alter_ctx *>(ha_alter_info->handler_ctx);
  if (!ctx) return false;
  if (ctx->rebuild) {
    if (!commit) {
      ctx->rebuild.reset(); /* drops the new table */
      return false;
    }
    if (ha_alter_info->group_commit_ctx)
      return commit_rebuild_group(altered_table, ha_alter_info);
    close_cursor();
    if (ctx->rebuild->finish(this, table, altered_table)) return true;
    ctx->rebuild.reset();
    return after_rebuild(altered_table);
  }
  if (!commit) {
    /* Rollback: the built families were never named; drop them now (an online
       build's are only unpublished, after the descriptor: see above). */
    ctx->unpublish();
    tdb_index_build_free(ctx->build);
    ctx->build = nullptr;
    return false;
  }
  close_cursor();
  /* First, as it is the step that may refuse (a new constraint without a parent
     index, a duplicate name): nothing is changed then. */
  if (ha_alter_info->handler_flags & FOREIGN_KEYS) {
    THD *thd = ha_thd();
    if (int err = fk_define(thd, m_name.c_str(), true)) {
      if (!thd->is_error()) print_error(err, MYF(0));
      return true;
    }
  }
  int st = tdb_index_build_commit(ctx->build, m_name.c_str(), ctx->layout.data(),
                                  ctx->layout.size(), statement_lock_wait_ms(ha_thd()));
  if (st) {
    print_error(fail(st), MYF(0));
    return true;
  }
  /* No row change runs now (exclusive metadata lock): the writers stop adding
     the entries the new definition's handlers will add as theirs. */
  ctx->unpublish();
  tdb_index_build_free(ctx->build);
  ctx->build = nullptr;
  /* Constraints name columns and find their indexes through the recorded keys. */
  if (ha_alter_info->handler_flags & ALTER_COLUMN_NAME) {
    for (const Create_field &cf : ha_alter_info->alter_info->create_list) {
      if (!cf.field || tidesdb_compat::ident_eq(cf.field->field_name.str, cf.field_name.str))
        continue;
      if ((st = tdb_fk_rename_column(m_name.c_str(), cf.field->field_name.str,
                                     cf.field_name.str))) {
        print_error(fail(st), MYF(0));
        return true;
      }
    }
  }
  if ((st = fk_register_keys(m_name.c_str(), altered_table))) {
    print_error(fail(st), MYF(0));
    return true;
  }
  /* Saved statistics were per key position: the catalog dropped them. */
  if (m_share) m_share->forget_statistics();
  return false;
}

/* What follows a committed rebuild of this handler's table. */
bool ha_tidesdb::after_rebuild(TABLE *altered_table) {
  if (int st = fk_register_keys(m_name.c_str(), altered_table)) {
    print_error(fail(st), MYF(0));
    return true;
  }
  if (m_share) {
    m_share->forget_statistics();
    std::lock_guard<std::mutex> guard(m_share->count_mutex);
    m_share->count_stamp = UINT64_MAX;
  }
  return false;
}

/* The commit of an online rebuild of a partitioned table: the server's partition
   handler calls the first partition's commit with every partition's context
   (group_commit_ctx, NULL-terminated); all switch in one catalog transaction
   (Online_rebuild::finish_group), and group_commit_ctx is cleared to say so. A
   failure leaves every partition as it was; the server's rollback then drops
   each partition's new table. */
bool ha_tidesdb::commit_rebuild_group(TABLE *altered_table, Alter_inplace_info *ha_alter_info) {
  std::vector<Online_rebuild::Part> parts;
  for (inplace_alter_handler_ctx **p = ha_alter_info->group_commit_ctx; *p; p++) {
    auto *c = static_cast<Tidesdb_alter_ctx *>(*p);
    if (!c->rebuild || !c->owner) {
      my_error(ER_INTERNAL_ERROR, MYF(0), "TidesDB: a partition was not rebuilt");
      return true;
    }
    parts.push_back({c->owner, c->rebuild.get()});
  }
  /* The partitioned table's path: a partition's without its suffix. */
  const std::string &name = parts.empty() ? m_name : parts[0].handler->m_name;
  size_t base = name.rfind('/');
  base = base == std::string::npos ? 0 : base + 1;
  size_t cut = name.find("#P#", base);
  if (cut == std::string::npos) cut = name.find("#p#", base);
  if (cut == std::string::npos) {
    my_error(ER_INTERNAL_ERROR, MYF(0), "TidesDB: a partition's name has no partition suffix");
    return true;
  }
  std::string path = name.substr(0, cut);
  for (const Online_rebuild::Part &p : parts) p.handler->close_cursor();
  if (Online_rebuild::finish_group(parts, altered_table, path)) return true;
  ha_alter_info->group_commit_ctx = nullptr;
  bool failed = false;
  for (const Online_rebuild::Part &p : parts) failed |= p.handler->after_rebuild(altered_table);
  return failed;
}
