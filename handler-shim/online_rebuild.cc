/*
  Online rebuild: the shim's half (see online_rebuild.h and ffi/src/rebuild.rs).

  What is rebuilt online (refusal): a table without FULLTEXT / SPATIAL / hash
  keys, whose new definition keeps a primary key (or keeps none: the hidden row
  ids stay), and whose new columns take a constant default or are generated; a
  table with FOREIGN KEYs (a child) only for FORCE, new indexes and new or moved
  columns (FK_CHILD_REBUILD: the constraints read nothing that changes); a table
  FOREIGN KEYs reference (a parent) only for FORCE, index and primary key changes
  that leave every constraint an index, and new or moved columns
  (FK_PARENT_REBUILD, FK_PARENT_KEY_CHANGES). A child's writes through a
  parent's cascades are logged as any other: the parent's statement holds the
  child's metadata lock, so the switch waits for it. A child's check locks the
  referenced value in the parent's index family without the parent's metadata
  lock: the switch waits for those locks (Rebuild::commit_group), and a check
  that resolved the constraint before the switch resolves it again (its family
  is gone: TDB_STALE). Not rebuilt
  online, so copied (LOCK=SHARED): ALTER IGNORE, ADD CONSTRAINT ... CHECK (the
  copy checks every row; InnoDB copies it too), a virtual
  column made a stored base column (its old value is never stored: only the old
  table's expression gives it), a table partitioned by a generated column (a
  new expression could move a row to another partition), system versioning and
  periods. A rebuild whose new definition has an index on a virtual column
  takes writes blocked (LOCK=SHARED, still in place) unless the ALTER only adds
  indexes: InnoDB refuses LOCK=NONE there with the same reason
  (check_if_supported_inplace_alter), although the replay below would compute
  those entries as it does the build's.

  A partitioned table: the server's partition handler runs each step on every
  partition's handler; each partition is rebuilt as a table of its own (its own
  log, snapshot and new families), except that the columns the partitioning
  reads keep their storage (a row stays in its partition). The switch is one
  for all (finish_group, called by the first partition's commit with the
  others' contexts, Alter_inplace_info::group_commit_ctx): every partition's
  log is replayed, then one catalog transaction switches them all and records
  the new definition's id under the partitioned table's path, which the
  server's DDL recovery asks about after a crash (tidesdb_check_version).

  Rows are converted as copy_data_between_tables converts them: a Copy_field per
  base column of the new definition that has an old one (Create_field::field),
  the others left at their defaults; then the new definition's generated columns
  are computed from its expressions (TABLE::update_virtual_fields of the altered
  table, VCOL_UPDATE_FOR_WRITE): stored ones to be stored, virtual ones (not
  stored, row_codec.h) for the entries of the indexes on them. In strict mode a
  value that does not fit, or a NULL for a NOT NULL column, fails the ALTER with
  the server's own error (abort_on_warning), otherwise it is adjusted with a
  warning. CHECK constraints: a row is checked (TABLE::verify_constraints, as
  the copy does) only when the ALTER can change a stored or generated value (a
  column type, a stored generated column's expression or a new one): a row that
  met the constraints still does otherwise, and InnoDB's in-place rebuild checks
  none (it copies, and so checks, exactly those changes).

  BLOB/TEXT values stored outside the row (row_codec.h) are read with the row
  (through the same transaction: the build's snapshot, or the latest version at
  the replay) and written again under the new row key when the new row stores
  them external; the replay deletes the new table's external values of a row
  with its row, blindly (a tombstone of a key never written is harmless).
*/
#include "ha_tidesdb.h"
#include "online_rebuild.h"
#include "external_values.h"
#include "foreign_keys.h"
#include "key_codec.h"
#include "row_codec.h"

using namespace tidesdb;

/* Rows per progress report. */
static const ha_rows REBUILD_PROGRESS_ROWS = 1024;

Online_rebuild::~Online_rebuild() {
  delete[] m_copies;
  if (m_snapshot) tdb_trx_free(m_snapshot);
  if (m_build) tdb_rebuild_free(m_build); /* not committed: drops the new table */
}

/* Changes after which a row's stored or generated values may differ from those
   it met the CHECK constraints with. */
static const alter_table_operations VALUE_CHANGES =
    ALTER_STORED_COLUMN_TYPE | ALTER_VIRTUAL_COLUMN_TYPE | ALTER_STORED_GCOL_EXPR |
    ALTER_ADD_STORED_GENERATED_COLUMN | ALTER_COLUMN_VCOL;

/* What a rebuild of a table with FOREIGN KEY constraints (a child, referenced by
   none) may change: nothing a constraint reads (its columns, their types and
   names, the keys that serve it). */
static const alter_table_operations FK_CHILD_REBUILD =
    ALTER_RECREATE | ALTER_ADD_NON_UNIQUE_NON_PRIM_INDEX | ALTER_ADD_UNIQUE_INDEX |
    ALTER_ADD_COLUMN | ALTER_STORED_COLUMN_ORDER | ALTER_VIRTUAL_COLUMN_ORDER |
    ALTER_CHANGE_COLUMN_DEFAULT | ALTER_CHANGE_CREATE_OPTION | ALTER_CHANGE_INDEX_COMMENT |
    ALTER_INDEX_ORDER | ALTER_INDEX_IGNORABILITY;

/* What a rebuild of a table FOREIGN KEY constraints reference (a parent) may
   change: nothing a child's check reads. New indexes may move the one a
   constraint resolves to, or come before it: a check names the family it
   resolved to by id, and resolves again once that family is no longer the
   parent's (tdb_fk_probe's TDB_STALE). */
static const alter_table_operations FK_PARENT_REBUILD =
    ALTER_RECREATE | ALTER_ADD_NON_UNIQUE_NON_PRIM_INDEX | ALTER_ADD_UNIQUE_INDEX |
    ALTER_ADD_COLUMN | ALTER_STORED_COLUMN_ORDER | ALTER_VIRTUAL_COLUMN_ORDER |
    ALTER_CHANGE_COLUMN_DEFAULT | ALTER_CHANGE_CREATE_OPTION | ALTER_CHANGE_INDEX_COMMENT |
    ALTER_INDEX_ORDER | ALTER_INDEX_IGNORABILITY;

/* Key changes of a parent that rebuild online when every constraint referencing
   it still finds an index in the new definition (fk_keys_serve_children): a
   check resolves the constraint again after the switch, as for new indexes. */
static const alter_table_operations FK_PARENT_KEY_CHANGES =
    ALTER_ADD_PK_INDEX | ALTER_DROP_PK_INDEX | ALTER_DROP_NON_UNIQUE_NON_PRIM_INDEX |
    ALTER_DROP_UNIQUE_INDEX;

/* Column changes a table with constraints (either side) rebuilds online when no
   constraint reads the changed columns (changed_constraint_column). */
static const alter_table_operations FK_COLUMN_CHANGES =
    ALTER_STORED_COLUMN_TYPE | ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE | ALTER_COLUMN_NULLABLE |
    ALTER_COLUMN_NOT_NULLABLE;

/* True if the new column's values differ in type, size, character set, sign or
   scale from the old one's. */
static bool column_type_changes(const Field *f, const Field *g) {
  return f->real_type() != g->real_type() || f->pack_length() != g->pack_length() ||
         f->field_length != g->field_length || f->charset() != g->charset() ||
         (f->flags & UNSIGNED_FLAG) != (g->flags & UNSIGNED_FLAG) ||
         f->decimals() != g->decimals();
}

const char *Online_rebuild::changed_constraint_column(const char *name, TABLE *to,
                                                      Alter_inplace_info *info) {
  std::vector<std::string> read;
  for (int as_parent = 0; as_parent < 2; as_parent++) {
    tdb_fk_list *list = nullptr;
    if (tdb_fk_list_open(name, as_parent, &list)) return nullptr;
    for (uint32_t i = 0; i < tdb_fk_list_count(list); i++) {
      const tdb_fk_info *fk = tdb_fk_list_get(list, i);
      for (uint32_t c = 0; c < fk->n_cols; c++)
        read.emplace_back(as_parent ? fk->parent_cols[c] : fk->child_cols[c]);
    }
    tdb_fk_list_free(list);
  }
  List_iterator_fast<Create_field> it(info->alter_info->create_list);
  for (Field **fp = to->field; *fp; fp++) {
    const Create_field *cf = it++;
    if (!cf || !cf->field ||
        !(column_type_changes(cf->field, *fp) || cf->field->maybe_null() != (*fp)->maybe_null()))
      continue;
    for (const std::string &col : read)
      if (tidesdb_compat::ident_eq(col.c_str(), cf->field->field_name.str))
        return cf->field->field_name.str;
  }
  return "";
}

/* Whether table name has FOREIGN KEY constraints of its own (is a child). */
static bool declares_foreign_keys(const char *name) {
  tdb_fk_list *list = nullptr;
  if (tdb_fk_list_open(name, 0, &list)) return true; /* unknown: as a child */
  bool any = tdb_fk_list_count(list) > 0;
  tdb_fk_list_free(list);
  return any;
}

const char *Online_rebuild::refusal(ha_tidesdb *h, TABLE *from, TABLE *to,
                                    Alter_inplace_info *info) {
  if (!h->m_share) return "TidesDB: the table is not open";
  if (info->ignore) return "ALTER IGNORE removes duplicates by copying the table";
  if (info->handler_flags & ALTER_ADD_CHECK_CONSTRAINT)
    return "TidesDB adds a CHECK constraint by copying the table (the copy checks every row)";
  if (info->handler_flags & (ALTER_ADD_FOREIGN_KEY | ALTER_DROP_FOREIGN_KEY |
                             ALTER_ADD_PERIOD | ALTER_DROP_PERIOD |
                             ALTER_ADD_SYSTEM_VERSIONING | ALTER_DROP_SYSTEM_VERSIONING |
                             ALTER_COLUMN_UNVERSIONED))
    return "TidesDB rebuilds online only for changes of columns, indexes and keys";
  /* A child row's check locks the referenced value in the parent's index family
     (the switch waits for those locks: Rebuild::commit_group). */
  bool parent = h->referenced_by_foreign_key();
  if (parent &&
      (info->handler_flags & ~(FK_PARENT_REBUILD | FK_PARENT_KEY_CHANGES | FK_COLUMN_CHANGES)))
    return "TidesDB rebuilds a table that FOREIGN KEY constraints reference online only "
           "for FORCE, index and primary key changes, new or moved columns and changes "
           "of columns no constraint reads";
  /* The copy reports the constraint that would lose its index (ER_DROP_INDEX_FK). */
  if (parent && (info->handler_flags & FK_PARENT_KEY_CHANGES) &&
      !fk_keys_serve_children(h->m_name.c_str(), to))
    return "TidesDB drops an index a FOREIGN KEY constraint needs by copying the table";
  /* The copy checks the constraints against changed columns and keys. */
  if (declares_foreign_keys(h->m_name.c_str()) &&
      (info->handler_flags & ~(FK_CHILD_REBUILD | FK_COLUMN_CHANGES)))
    return "TidesDB rebuilds a table with FOREIGN KEY constraints online only for FORCE, "
           "new indexes, new or moved columns and changes of columns no constraint reads";
  if ((h->referenced_by_foreign_key() || !h->can_switch_engines()) &&
      (info->handler_flags & FK_COLUMN_CHANGES)) {
    const char *col = changed_constraint_column(h->m_name.c_str(), to, info);
    if (!col) return "TidesDB: the table's FOREIGN KEY constraints cannot be read";
    if (*col)
      return "TidesDB changes a column a FOREIGN KEY constraint reads by copying the table";
  }
  if ((info->handler_flags & ALTER_CHANGE_CREATE_OPTION) &&
      (info->create_info->used_fields & ~(ulong)(HA_CREATE_USED_COMMENT | HA_CREATE_USED_ENGINE)))
    return "TidesDB changes table options by copying the table";
  for (uint k = 0; k < to->s->keys; k++) {
    const KEY *key = &to->key_info[k];
    if (tidesdb_compat::key_is_fulltext(key) || tidesdb_compat::key_is_spatial(key) ||
        key->algorithm == HA_KEY_ALG_LONG_HASH)
      return "TidesDB rebuilds online only tables of ordinary indexes";
  }
  bool old_hidden = from->s->primary_key >= MAX_KEY;
  bool new_hidden = to->s->primary_key >= MAX_KEY;
  if (new_hidden && !old_hidden)
    return "TidesDB drops a primary key without adding one by copying the table";
  List_iterator_fast<Create_field> it(info->alter_info->create_list);
  for (Field **fp = to->field; *fp; fp++) {
    const Create_field *cf = it++;
    if (!cf) return "TidesDB: the new columns do not match the statement";
    Field *g = *fp;
    if (cf->field && cf->field->table != from)
      return "TidesDB: the new columns do not match the statement";
    bool new_auto = (g->flags & AUTO_INCREMENT_FLAG) &&
                    !(cf->field && (cf->field->flags & AUTO_INCREMENT_FLAG));
    if (new_auto) return "TidesDB numbers the rows of a new AUTO_INCREMENT column by copying the table";
    if (!cf->field && !g->vcol_info && (g->default_value || g->unireg_check != Field::NONE))
      return "TidesDB adds a column whose default is an expression by copying the table";
    /* A base column's value is copied from the old row, where a virtual column
       has none. */
    if (cf->field && !g->vcol_info && !cf->field->stored_in_db())
      return "TidesDB makes a virtual column a stored base column by copying the table";
    if ((g->vcol_info && (g->flags & FIELD_IN_PART_FUNC_FLAG)) ||
        (cf->field && cf->field->vcol_info && (cf->field->flags & FIELD_IN_PART_FUNC_FLAG)))
      return "TidesDB rebuilds a table partitioned by a generated column by copying it";
    /* Each partition is rebuilt into itself: a row stays in its partition only
       while the columns the partitioning reads keep their values' storage. */
    Field *f = cf->field;
    if (f && (f->flags & FIELD_IN_PART_FUNC_FLAG) && column_type_changes(f, g))
      return "TidesDB changes a column of the partitioning function by copying the table";
  }
  return nullptr;
}

bool Online_rebuild::engine_error(ha_tidesdb *h, int st) {
  h->print_error(h->fail(st), MYF(0));
  return true;
}

bool Online_rebuild::prepare(ha_tidesdb *h, TABLE *from, TABLE *to, Alter_inplace_info *info,
                             const std::vector<uint32_t> &sources) {
  /* A prepared XA transaction of a gone connection holds no metadata lock: its
     XA COMMIT could later change rows the log never saw. */
  if (tdb_table_has_prepared_writes(h->m_tbl)) {
    my_printf_error(ER_LOCK_WAIT_TIMEOUT,
                    "TidesDB: a prepared XA transaction (see XA RECOVER) changed rows of the "
                    "table: XA COMMIT or XA ROLLBACK it before rebuilding the table",
                    MYF(0));
    return true;
  }
  m_new_hidden = to->s->primary_key >= MAX_KEY;
  bool old_hidden = from->s->primary_key >= MAX_KEY;
  /* The rows' keys change unless the primary key keeps its parts, stored alike. */
  m_pk_changed = m_new_hidden != old_hidden;
  if (!m_new_hidden && !old_hidden) {
    const KEY *a = &from->key_info[from->s->primary_key];
    const KEY *b = &to->key_info[to->s->primary_key];
    m_pk_changed = a->user_defined_key_parts != b->user_defined_key_parts;
    for (uint p = 0; !m_pk_changed && p < a->user_defined_key_parts; p++) {
      const KEY_PART_INFO &x = a->key_part[p], &y = b->key_part[p];
      Field *f = x.field, *g = y.field;
      m_pk_changed = x.length != y.length || f->real_type() != g->real_type() ||
                     f->pack_length() != g->pack_length() || f->charset() != g->charset() ||
                     (f->flags & UNSIGNED_FLAG) != (g->flags & UNSIGNED_FLAG) ||
                     (x.key_part_flag & HA_REVERSE_SORT) != (y.key_part_flag & HA_REVERSE_SORT);
      /* The same key parts must name the same column. */
      List_iterator_fast<Create_field> it(info->alter_info->create_list);
      const Create_field *cf = nullptr;
      for (uint i = 0; i <= g->field_index; i++) cf = it++;
      if (!cf || cf->field != f) m_pk_changed = true;
    }
  }
  /* Version 1 of the new table's columns: each stored field's id is its index. */
  std::vector<uint32_t> ids;
  std::vector<uint8_t> flags;
  for (Field **fp = to->field; *fp; fp++) {
    if (!(*fp)->stored_in_db()) continue;
    ids.push_back((*fp)->field_index);
    flags.push_back((*fp)->flags & BLOB_FLAG ? TDB_COLUMN_BLOB : 0);
  }
  if (sources.size() != to->s->keys - (m_new_hidden ? 0 : 1)) {
    my_error(ER_INTERNAL_ERROR, MYF(0), "TidesDB: the new keys do not match the statement");
    return true;
  }
  int st = tdb_rebuild_begin(h->m_name.c_str(), sources.data(), sources.size(), ids.data(),
                             flags.data(), ids.size(), &m_build);
  if (st) {
    m_build = nullptr;
    return engine_error(h, st);
  }
  size_t n = 0;
  std::vector<uint32_t> flat;
  st = tdb_rebuild_columns(m_build, nullptr, 0, &n);
  if (!st) {
    flat.resize(n);
    st = tdb_rebuild_columns(m_build, flat.data(), n, &n);
  }
  if (st) return engine_error(h, st);
  if (!m_new_layout.load(to, flat)) {
    my_error(ER_INTERNAL_ERROR, MYF(0), "TidesDB: the rebuilt table's columns do not load");
    return true;
  }
  m_engine_index.assign(to->s->keys, 0);
  m_covered.assign(to->s->keys, std::vector<Field *>());
  uint next = 1;
  for (uint k = 0; k < to->s->keys; k++) {
    if (!m_new_hidden && k == to->s->primary_key) continue;
    m_engine_index[k] = next++;
    covered_fields(to, k, m_new_hidden, &m_covered[k]);
  }
  /* The conversions, as copy_data_between_tables sets them up. */
  m_copies = new Copy_field[to->s->fields];
  List_iterator_fast<Create_field> it(info->alter_info->create_list);
  for (Field **fp = to->field; *fp; fp++) {
    const Create_field *cf = it++;
    /* A generated column is computed from the new expression (convert). */
    if (!cf || !cf->field || (*fp)->vcol_info) continue;
    if ((*fp)->check_assignability_from(cf->field, false)) return true;
    m_copies[m_n_copies++].set(*fp, cf->field, false);
  }
  m_check_rows = to->check_constraints && (info->handler_flags & VALUE_CHANGES);
  return false;
}

bool Online_rebuild::convert(ha_tidesdb *h, TABLE *from, TABLE *to, tdb_trx *trx,
                             const std::string &pk, const std::string &row, bool to_put) {
  Engine_external_reader reader(trx, h->m_tbl, from, pk, false, Engine_external_reader::WANT_ALL,
                                &m_externals);
  if (!decode_row(from, h->m_layout, row, from->record[0], &reader, nullptr, nullptr)) {
    if (reader.status && reader.status != TDB_NOT_FOUND && reader.status != TDB_CORRUPTION)
      return !engine_error(h, reader.status);
    my_printf_error(ER_INTERNAL_ERROR, "TidesDB: %s", MYF(0),
                    reader.status ? reader.error.c_str() : "a stored row does not decode");
    return false;
  }
  restore_record(to, s->default_values);
  for (size_t i = 0; i < m_n_copies; i++) m_copies[i].do_copy(&m_copies[i]);
  THD *thd = h->ha_thd();
  if (thd->is_error()) return false;
  /* The altered table's handler is never opened: it only says that no keyread
     is on, which update_virtual_fields asks. */
  if (to->vfield && to->update_virtual_fields(to->file ? to->file : h, VCOL_UPDATE_FOR_WRITE))
    return false;
  /* The snapshot's version of a logged row is only removed: the build checked it. */
  if (m_check_rows && to_put && to->verify_constraints(false) != VIEW_CHECK_OK) return false;
  return !thd->is_error();
}

void Online_rebuild::derive(TABLE *to, const std::string &old_pk, Derived *out) {
  uchar *rec = to->record[0];
  if (m_new_hidden) {
    out->pk = old_pk; /* the hidden row ids stay */
  } else {
    out->pk.clear();
    KEY *pk = &to->key_info[to->s->primary_key];
    encode_key_from_record(to, pk, pk->user_defined_key_parts, rec, &out->pk);
  }
  Row_externals ext;
  encode_row(to, m_new_layout, rec, &out->row, &ext);
  out->externals.clear();
  for (const Row_externals::Value &v : ext.written) {
    out->externals.emplace_back();
    Derived::External &x = out->externals.back();
    external_key(out->pk, m_new_layout.column_no(to->field[v.field]), &x.key);
    x.data = v.data;
    x.len = v.len;
  }
  out->keys.resize(to->s->keys);
  out->values.resize(to->s->keys);
  out->unique.assign(to->s->keys, false);
  ha_tidesdb::Index_entry e;
  for (uint k = 0; k < to->s->keys; k++) {
    if (!m_engine_index[k]) continue;
    ha_tidesdb::encode_entry(to, k, m_covered[k], rec, out->pk, &e);
    out->keys[k] = e.key;
    out->values[k] = e.value;
    out->unique[k] = e.unique;
  }
}

bool Online_rebuild::put(ha_tidesdb *h, TABLE *to, const Derived &d, uint *dup_key) {
  int st = tdb_rebuild_put(m_build, 0, (const uint8_t *)d.pk.data(), d.pk.size(),
                           (const uint8_t *)d.row.data(), d.row.size(), m_pk_changed);
  if (st == TDB_DUPLICATE && dup_key) {
    *dup_key = to->s->primary_key;
    return false;
  }
  if (st == TDB_DUPLICATE) {
    /* to->record[0] holds the row: the message names its value, as InnoDB's. */
    print_keydup_error(to, &to->key_info[to->s->primary_key], MYF(0));
    return false;
  }
  if (st) return !engine_error(h, st);
  for (uint k = 0; k < to->s->keys; k++) {
    if (!m_engine_index[k]) continue;
    st = tdb_rebuild_put(m_build, m_engine_index[k], (const uint8_t *)d.keys[k].data(),
                         d.keys[k].size(), (const uint8_t *)d.values[k].data(),
                         d.values[k].size(), d.unique[k]);
    if (st == TDB_DUPLICATE) {
      if (dup_key)
        *dup_key = k;
      else
        print_keydup_error(to, &to->key_info[k], MYF(0));
      return false;
    }
    if (st) return !engine_error(h, st);
  }
  for (const Derived::External &x : d.externals) {
    st = tdb_rebuild_put(m_build, TDB_BLOB_INDEX, (const uint8_t *)x.key.data(), x.key.size(),
                         x.data, x.len, 0);
    if (st) return !engine_error(h, st);
  }
  return true;
}

bool Online_rebuild::remove(ha_tidesdb *h, TABLE *to, const Derived &d) {
  int st = tdb_rebuild_delete(m_build, 0, (const uint8_t *)d.pk.data(), d.pk.size());
  std::string key;
  for (Field **fp = to->field; !st && *fp; fp++) {
    if (!((*fp)->flags & BLOB_FLAG) || !(*fp)->stored_in_db()) continue;
    external_key(d.pk, m_new_layout.column_no(*fp), &key);
    st = tdb_rebuild_delete(m_build, TDB_BLOB_INDEX, (const uint8_t *)key.data(), key.size());
  }
  for (uint k = 0; !st && k < m_engine_index.size(); k++)
    if (m_engine_index[k])
      st = tdb_rebuild_delete(m_build, m_engine_index[k], (const uint8_t *)d.keys[k].data(),
                              d.keys[k].size());
  return st ? !engine_error(h, st) : true;
}

/* Runs f with the server's conversion rules of ALTER TABLE's copy: warnings
   counted per row, and in strict mode a warning fails the statement. */
template <class F>
static bool with_copy_rules(THD *thd, F f) {
  bool save_abort = thd->abort_on_warning;
  enum_check_fields save_check = thd->count_cuted_fields;
  thd->abort_on_warning = thd->is_strict_mode();
  thd->count_cuted_fields = CHECK_FIELD_WARN;
  thd->get_stmt_da()->reset_current_row_for_warning(1);
  bool ok = f();
  thd->abort_on_warning = save_abort;
  thd->count_cuted_fields = save_check;
  return ok;
}

bool Online_rebuild::build(ha_tidesdb *h, TABLE *from, TABLE *to) {
  THD *thd = h->ha_thd();
  m_snapshot = tdb_trx_new();
  int st = m_snapshot ? tdb_trx_begin(m_snapshot, TDB_ISO_REPEATABLE_READ) : TDB_INTERNAL;
  if (!st) st = tdb_trx_snapshot(m_snapshot);
  if (st) return engine_error(h, st);
  tdb_cursor *c = nullptr;
  st = tdb_cursor_open(m_snapshot, h->m_tbl, 0, &c);
  if (st) return engine_error(h, st);
  std::string pk, row;
  Derived d;
  ha_rows done = 0, total = h->stats.records;
  bool failed = false;
  Build_pacer pacer(thd);
  /* As InnoDB's rebuild, which finds duplicates when it sorts the new keys after
     converting every row: a row that does not convert (a NULL for a column made
     NOT NULL, a value out of range) is the error even where a duplicate comes
     before it. So the first duplicate is reported once every row converted; the
     rows after it are converted only. */
  uint dup_key = MAX_KEY;
  std::string dup_pk;
  thd_progress_init(thd, 1);
  failed = !with_copy_rules(thd, [&]() {
    for (st = tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0); st == TDB_OK;
         st = tdb_cursor_next(c)) {
      if (!pacer.pace(done)) {
        thd->send_kill_message();
        return false;
      }
      const uint8_t *k, *v;
      size_t klen, vlen;
      if ((st = tdb_cursor_entry(c, &k, &klen, &v, &vlen))) break;
      pk.assign((const char *)k, klen);
      row.assign((const char *)v, vlen);
      if (!convert(h, from, to, m_snapshot, pk, row, true)) return false;
      if (dup_key == MAX_KEY) {
        derive(to, pk, &d);
        if (!put(h, to, d, &dup_key)) {
          if (dup_key == MAX_KEY) return false;
          dup_pk = pk;
        }
      }
      thd->get_stmt_da()->inc_current_row_for_warning();
      if (++done % REBUILD_PROGRESS_ROWS == 0)
        thd_progress_report(thd, done, total > done ? total : done);
    }
    return true;
  });
  thd_progress_end(thd);
  tdb_cursor_close(c);
  if (failed) return true;
  if (st != TDB_END) return engine_error(h, st);
  if (dup_key != MAX_KEY) return duplicate_error(h, from, to, dup_pk, dup_key);
  return false;
}

bool Online_rebuild::duplicate_error(ha_tidesdb *h, TABLE *from, TABLE *to,
                                     const std::string &pk, uint key) {
  tdb_cursor *c = nullptr;
  int st = tdb_cursor_open(m_snapshot, h->m_tbl, 0, &c);
  if (!st) st = tdb_cursor_seek(c, TDB_SEEK_GE, (const uint8_t *)pk.data(), pk.size());
  const uint8_t *k = nullptr, *v = nullptr;
  size_t klen = 0, vlen = 0;
  if (!st) st = tdb_cursor_entry(c, &k, &klen, &v, &vlen);
  if (!st && (klen != pk.size() || memcmp(k, pk.data(), klen))) st = TDB_NOT_FOUND;
  std::string row;
  if (!st) row.assign((const char *)v, vlen);
  if (c) tdb_cursor_close(c);
  if (st) return engine_error(h, st);
  /* The row converted once already: its warnings are not given twice. */
  THD *thd = h->ha_thd();
  Dummy_error_handler quiet;
  thd->push_internal_handler(&quiet);
  bool converted = convert(h, from, to, m_snapshot, pk, row, false);
  thd->pop_internal_handler();
  if (!converted) {
    my_error(ER_INTERNAL_ERROR, MYF(0), "TidesDB: a row converted differently the second time");
    return true;
  }
  /* to->record[0] holds the row: the message names its value, as InnoDB's. */
  print_keydup_error(to, &to->key_info[key], MYF(0));
  return true;
}

bool Online_rebuild::finish(ha_tidesdb *h, TABLE *from, TABLE *to) {
  if (replay(h, from, to)) return true;
  if (int st = tdb_rebuild_commit(m_build, statement_lock_wait_ms(h->ha_thd())))
    return engine_error(h, st);
  tdb_rebuild_free(m_build);
  m_build = nullptr;
  return false;
}

bool Online_rebuild::finish_group(const std::vector<Part> &parts, TABLE *to,
                                  const std::string &path) {
  if (parts.empty()) return false;
  for (const Part &p : parts)
    if (p.rebuild->replay(p.handler, p.handler->table, to)) return true;
  std::vector<tdb_rebuild *> builds;
  for (const Part &p : parts) builds.push_back(p.rebuild->m_build);
  /* The new .frm's id: the server's DDL recovery asks by it whether the
     switch committed (tidesdb_check_version). */
  const LEX_CUSTRING &version = to->s->tabledef_version;
  if (int st = tdb_rebuild_commit_group(builds.data(), builds.size(), path.c_str(),
                                        version.str, version.length,
                                        statement_lock_wait_ms(parts[0].handler->ha_thd())))
    return parts[0].rebuild->engine_error(parts[0].handler, st);
  for (const Part &p : parts) {
    tdb_rebuild_free(p.rebuild->m_build);
    p.rebuild->m_build = nullptr;
  }
  return false;
}

bool Online_rebuild::replay(ha_tidesdb *h, TABLE *from, TABLE *to) {
  THD *thd = h->ha_thd();
  size_t n = 0;
  int st = tdb_rebuild_take_log(m_build, &n);
  if (st) return engine_error(h, st);
  std::vector<std::string> keys(n);
  for (size_t i = 0; i < n && !st; i++) {
    const uint8_t *k;
    size_t len;
    if (!(st = tdb_rebuild_logged_key(m_build, i, &k, &len))) keys[i].assign((const char *)k, len);
  }
  if (st) return engine_error(h, st);
  /* The latest committed versions: no writer is left (exclusive lock). */
  tdb_trx *latest = tdb_trx_new();
  st = latest ? tdb_trx_begin(latest, TDB_ISO_READ_COMMITTED) : TDB_INTERNAL;
  if (st) {
    if (latest) tdb_trx_free(latest);
    return engine_error(h, st);
  }
  Derived d;
  std::string row;
  bool ok = with_copy_rules(thd, [&]() {
    /* First what the build derived from the snapshot's version of each row ... */
    for (const std::string &pk : keys) {
      const uint8_t *v;
      size_t vlen;
      int gs = tdb_get(m_snapshot, h->m_tbl, 0, (const uint8_t *)pk.data(), pk.size(), &v, &vlen);
      if (gs == TDB_NOT_FOUND) continue;
      if (gs) return !engine_error(h, gs);
      row.assign((const char *)v, vlen);
      if (!convert(h, from, to, m_snapshot, pk, row, false)) return false;
      derive(to, pk, &d);
      if (!remove(h, to, d)) return false;
    }
    /* ... then what the latest version of each gives (a value that moved between
       rows is then no duplicate). */
    for (const std::string &pk : keys) {
      const uint8_t *v;
      size_t vlen;
      int gs = tdb_get(latest, h->m_tbl, 0, (const uint8_t *)pk.data(), pk.size(), &v, &vlen);
      if (gs == TDB_NOT_FOUND) continue;
      if (gs) return !engine_error(h, gs);
      row.assign((const char *)v, vlen);
      if (!convert(h, from, to, latest, pk, row, true)) return false;
      derive(to, pk, &d);
      if (!put(h, to, d)) return false;
      thd->get_stmt_da()->inc_current_row_for_warning();
    }
    return true;
  });
  tdb_trx_free(latest);
  if (!ok) return true;
  /* Nothing reads the old table any more: the switch drops its families. */
  tdb_trx_free(m_snapshot);
  m_snapshot = nullptr;
  return false;
}
