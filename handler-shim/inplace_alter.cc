/*
  In-place ALTER TABLE for ha_tidesdb: ADD / DROP / RENAME INDEX and the
  metadata-only changes that leave the stored bytes as they are.

  What runs in place, and how:
  - Metadata only (INSTANT, no lock beyond the server's short exclusive one at the
    commit): RENAME COLUMN, SET/DROP DEFAULT, RENAME INDEX, index comments,
    IGNORED/NOT IGNORED, table COMMENT, RENAME TABLE, DROP INDEX. Rows store columns
    by position (row_codec) and index entries carry no names, so none of these
    change a byte; DROP INDEX removes the index from the catalog and drops its
    column family, so its space is reclaimed at once.
  - ADD INDEX / ADD UNIQUE (NOCOPY with LOCK=SHARED: the table is not rebuilt;
    concurrent reads go on, concurrent writes wait until the ALTER ends, as for
    MyRocks). The build scans the rows through a fresh engine snapshot taken after
    the server blocked writers (and waited for open write transactions on the table
    to end), so the scan sees every row and nothing changes behind it: no catch-up
    is needed. Entries go to new column families no catalog entry names yet, in
    engine transactions of bounded size (ffi/src/index_build.rs). A duplicate in a
    new UNIQUE index stops the build with ER_DUP_ENTRY naming the key; the new
    families are dropped and the table is unchanged.
  - The commit point is one engine transaction replacing the table's catalog entry
    with its new index list (tdb_index_build_commit). A crash before it leaves only
    unnamed families, dropped at the next start.
  - ADD COLUMN after the last column (INSTANT): no row is rewritten. A row keeps
    the column count it was written with, and decode_row gives the columns added
    since their defaults (row_codec.h), as InnoDB's instant ADD COLUMN does. Only
    columns whose default is a constant of the record image qualify (see
    instant_add_refusal); the old columns must keep their NULL-bit positions.
  Everything else (column types, NULL-ability, column order, columns added
  elsewhere or with an expression default, dropping columns, primary key
  changes, partitioned tables) is refused here, so the server
  falls back to ALGORITHM=COPY, or reports "ALGORITHM=... is not supported" when the
  statement asked for INPLACE, NOCOPY or INSTANT.
*/
#include "ha_tidesdb.h"
#include "errors.h"
#include "table_options.h"
#include "row_codec.h"
#include "foreign_keys.h"

using namespace tidesdb;

/* Changes that do not alter a stored byte. */
static const alter_table_operations METADATA_ONLY =
    ALTER_COLUMN_NAME | ALTER_CHANGE_COLUMN_DEFAULT | ALTER_CHANGE_INDEX_COMMENT |
    ALTER_RENAME_INDEX | ALTER_INDEX_IGNORABILITY | ALTER_RENAME | ALTER_INDEX_ORDER |
    ALTER_DROP_NON_UNIQUE_NON_PRIM_INDEX | ALTER_DROP_UNIQUE_INDEX |
    ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE /* only what can_convert_nocopy allows */;

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
  ~Tidesdb_alter_ctx() override {
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
      return "TidesDB adds generated columns by copying the table";
    if (f->flags & AUTO_INCREMENT_FLAG)
      return "TidesDB numbers the rows of a new AUTO_INCREMENT column by copying the table";
    if (f->default_value || f->unireg_check != Field::NONE)
      return "TidesDB adds a column whose default is an expression by copying the table";
  }
  return nullptr;
}

static bool key_has_virtual_part(const KEY *key) {
  for (uint p = 0; p < key->user_defined_key_parts; p++)
    if (key->key_part[p].field && !key->key_part[p].field->stored_in_db()) return true;
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

enum_alter_inplace_result ha_tidesdb::check_if_supported_inplace_alter(
    TABLE *altered_table, Alter_inplace_info *ha_alter_info) {
  alter_table_operations flags = ha_alter_info->handler_flags;
  if (flags &
      ~(METADATA_ONLY | ADD_INDEX | ADD_COLUMN_LAST | ALTER_CHANGE_CREATE_OPTION | FOREIGN_KEYS)) {
    ha_alter_info->unsupported_reason =
        "TidesDB changes in place only indexes (not primary keys), metadata and columns "
        "added last";
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
     indexes (or changes column types) by copying, where the server and the engine
     check the constraints against the new definition. (RENAME COLUMN stays in
     place: the constraint catalog follows at commit, as InnoDB's does.) */
  if ((flags & (ALTER_DROP_NON_UNIQUE_NON_PRIM_INDEX | ALTER_DROP_UNIQUE_INDEX |
                ALTER_COLUMN_TYPE_CHANGE_BY_ENGINE)) &&
      (referenced_by_foreign_key() || !can_switch_engines())) {
    ha_alter_info->unsupported_reason =
        "TidesDB drops indexes and changes column types of a table with FOREIGN KEY "
        "constraints by copying it";
    return HA_ALTER_INPLACE_NOT_SUPPORTED;
  }
  if (flags & ADD_COLUMN_LAST) {
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
    const KEY *key = &ha_alter_info->key_info_buffer[ha_alter_info->index_add_buffer[i]];
    if (key->flags & (HA_FULLTEXT | HA_SPATIAL) || key->algorithm == HA_KEY_ALG_LONG_HASH ||
        key_has_virtual_part(key)) {
      ha_alter_info->unsupported_reason =
          "TidesDB builds in place only ordinary indexes on stored columns";
      return HA_ALTER_INPLACE_NOT_SUPPORTED;
    }
  }
  ha_alter_info->unsupported_reason =
      "TidesDB blocks writes while it builds an index (reads go on)";
  return HA_ALTER_INPLACE_NOCOPY_LOCK;
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
    if (!dropped && !my_strcasecmp(system_charset_info, old->name.str, new_key->name.str))
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
    } else if (is_pk(old)) {
      my_error(ER_INTERNAL_ERROR, MYF(0), "TidesDB: a secondary key maps to the primary key");
      return true;
    } else {
      ctx->layout.push_back(engine_index(old));
    }
  }
  int st = tdb_index_build_begin(m_name.c_str(), (uint32_t)ctx->added.size(), &ctx->build);
  if (st) {
    ctx->build = nullptr;
    print_error(fail(st), MYF(0));
    return true;
  }
  return false;
}

bool ha_tidesdb::inplace_alter_table(TABLE *altered_table, Alter_inplace_info *ha_alter_info) {
  auto *ctx = static_cast<Tidesdb_alter_ctx *>(ha_alter_info->handler_ctx);
  if (!ctx || ctx->added.empty()) return false;
  return build_indexes(altered_table, ha_alter_info);
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
    external.loaded.assign(altered_table->s->fields, false);
    Engine_external_reader reader(t, m_tbl, altered_table, pk, false,
                                  Engine_external_reader::WANT_KEYS, &external);
    if (!decode_row(altered_table, row, rec, &reader, nullptr)) {
      my_error(ER_INTERNAL_ERROR, MYF(0),
               reader.status ? reader.error.c_str() : "TidesDB: a stored row does not decode");
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
  if (!commit) {
    /* Rollback: the built families were never named; drop them now. */
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
                                  ctx->layout.size());
  if (st) {
    print_error(fail(st), MYF(0));
    return true;
  }
  tdb_index_build_free(ctx->build);
  ctx->build = nullptr;
  /* Constraints name columns and find their indexes through the recorded keys. */
  if (ha_alter_info->handler_flags & ALTER_COLUMN_NAME) {
    for (const Create_field &cf : ha_alter_info->alter_info->create_list) {
      if (!cf.field || !my_strcasecmp(system_charset_info, cf.field->field_name.str,
                                      cf.field_name.str))
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
