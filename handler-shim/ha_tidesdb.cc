/*
  ha_tidesdb: handler methods. See ha_tidesdb.h; the engine-wide hooks
  (handlerton, transactions, system variables) are in tidesdb_plugin.cc.

  ## Format (storage layout per table; docs/ARCHITECTURE.md)
    engine index 0   rows:    key   = primary key encoding (key_codec), or the
                                      8-byte big-endian hidden row id
                              value = row_codec encoding of the record
    engine index i   key i:   non-unique key, or a unique key with a NULL part:
                                key   = key columns encoding + primary key
                              unique key without NULL parts:
                                key   = key columns encoding
                              value (both kinds), version 2:
                                u8  header = 0x20 (version 2 << 4) | bit0 unique
                                [primary key encoding]     only if unique
                                covered columns, in order: for each key part that
                                  is a whole column (not a prefix part, not a
                                  BLOB/TEXT), then each such primary key column not
                                  listed yet, one of:
                                    u8 0                     the column is NULL
                                    u8 1 + Field::pack() image
                                    u8 2  the value is its key image in the entry
                                          (the key's own part for that column,
                                          else the primary key's), decoded by
                                          key_codec's decode_sort_image
                              Version 1 (header 0x10) is the same without tag 2;
                              both are read, version 2 is written. Tag 2 is
                              written only for a value whose image decodes back to
                              its own bytes (numbers, temporals: not -0.0, not
                              strings), which leaves the entry the key's bytes
                              and a byte per column instead of a second copy of
                              each. Entries are not rewritten by the upgrade:
                              each becomes version 2 when its row is written
                              again (or ALTER TABLE ... FORCE); CHECK TABLE
                              takes either form as the row's (test
                              upgrade_index_entry_v1: a datadir of version 1
                              entries). An older plugin reports a version 2
                              entry as corrupt.
  A non-unique key's entry key (key columns, then every primary key column) is what
  the server's extended key (HTON_SUPPORTS_EXTENDED_KEYS: the key's parts + the
  primary key parts it lacks) orders by; key_codec.h (Extended keys) maps its key
  images. The server never extends a unique key.
  Keying a unique entry by its columns alone makes a duplicate the same engine
  key: the uniqueness check is one point read, and two transactions inserting the
  same value write the same key, which the engine's conflict check (or lock)
  serialises. The covered columns let an index-only read (keyread) fill every
  column the server reads from the index without fetching the row; a string's key
  encoding (collation weights) cannot be decoded, so strings are stored in the
  value.
*/
#include "ha_tidesdb.h"
#include "errors.h"
#include "foreign_keys.h"
#include "key_codec.h"
#include "row_codec.h"
#include "cost_model.h"
#include "status.h"
#include "table_options.h"
#include "spatial.h"
#include "transport.h"
#include <chrono>

using namespace tidesdb;

static const uint HIDDEN_PK_LEN = 8;
/* Header byte of a secondary index entry's value (see Format). */
static const uchar ENTRY_FORMAT_V1 = 0x10;
static const uchar ENTRY_FORMAT_V2 = 0x20;
static const uchar ENTRY_VERSION_MASK = 0xF0;
static const uchar ENTRY_UNIQUE = 0x01;
/* A covered column's tag in an entry's value (see Format). */
static const uchar COLUMN_NULL = 0;
static const uchar COLUMN_PACKED = 1;
static const uchar COLUMN_IN_KEY = 2;

static bool is_entry_format(uchar header) {
  uchar v = header & ENTRY_VERSION_MASK;
  return v == ENTRY_FORMAT_V1 || v == ENTRY_FORMAT_V2;
}

/* The part of an entry of `key` that holds field f's key image (see Format,
   tag 2): a whole-column part of the key's own parts, else of the primary key
   (pk: null for a hidden primary key). */
struct Image_part {
  const KEY *key;
  uint part;
};
static bool image_part_of(const KEY *key, const KEY *pk, const Field *f, Image_part *out) {
  for (const KEY *k : {key, pk}) {
    if (!k) continue;
    for (uint p = 0; p < k->user_defined_key_parts; p++) {
      const KEY_PART_INFO *kp = &k->key_part[p];
      if (kp->field == f && part_is_covered(kp)) {
        *out = {k, p};
        return true;
      }
    }
  }
  return false;
}

ha_tidesdb::ha_tidesdb(handlerton *hton, TABLE_SHARE *share) : handler(hton, share) {}

ha_tidesdb::~ha_tidesdb() {
  close_cursor();
  fk_forget();
  if (m_tbl) tdb_table_close(m_tbl);
  my_free(m_scratch_rec);
}

int ha_tidesdb::fail(int status) {
  int err = to_ha_error(status, ha_thd());
  if (private_error_text(err)) {
    m_last_error = tdb_last_error();
    sql_print_error("TidesDB: %s (table %s)", m_last_error.c_str(), m_name.c_str());
  }
  return err;
}

bool ha_tidesdb::get_error_message(int error, String *buf) {
  if (error == HA_ERR_NO_REFERENCED_ROW || error == HA_ERR_ROW_IS_REFERENCED ||
      error == HA_ERR_FK_DEPTH_EXCEEDED) {
    buf->copy(m_fk_error.c_str(), m_fk_error.size(), system_charset_info);
    return false;
  }
  const char *text = private_error_text(error);
  if (!text) return false;
  buf->copy(text, strlen(text), system_charset_info);
  if (!m_last_error.empty()) {
    buf->append(STRING_WITH_LEN(": "));
    buf->append(m_last_error.c_str(), m_last_error.size());
  }
  return false;
}

tdb_trx *ha_tidesdb::trx() { return is_sequence() ? sequence_trx() : get_trx(ha_thd(), true); }

/* ---------------------------------------------------------------- capabilities */

ulonglong ha_tidesdb::table_flags() const {
  /* HA_PRIMARY_KEY_IN_READ_INDEX: a keyread of a secondary index restores the
     primary key's columns too (they are covered columns of every entry). */
  /* HA_CAN_VIRTUAL_COLUMNS: virtual columns are not stored (row_codec); the server
     computes them after each read into record[0] and before each write, so an
     index on one is encoded from the record like any other (also for the old row of
     an UPDATE / DELETE: HA_REQUIRES_KEY_COLUMNS_FOR_DELETE makes the server read and
     compute every key column). UNIQUE on BLOB/TEXT becomes the server's long-hash key
     (an index on a hidden virtual column; the server checks the uniqueness). */
  return HA_CAN_VIRTUAL_COLUMNS | HA_PRIMARY_KEY_IN_READ_INDEX | HA_BINLOG_ROW_CAPABLE | HA_REC_NOT_IN_SEQ | HA_NULL_IN_KEY | HA_CAN_INDEX_BLOBS |
         HA_PRIMARY_KEY_REQUIRED_FOR_POSITION | HA_TABLE_SCAN_ON_INDEX |
         HA_REQUIRES_KEY_COLUMNS_FOR_DELETE | HA_ONLINE_ANALYZE | HA_CAN_SQL_HANDLER |
         /* FULLTEXT (fulltext.cc); _EXT: MATCH needs a FULLTEXT index, as in InnoDB */
         HA_CAN_FULLTEXT | HA_CAN_FULLTEXT_EXT |
         /* SPATIAL keys (spatial.cc) on GEOMETRY columns */
         HA_CAN_GEOMETRY | HA_CAN_RTREEKEYS |
         /* SELECT ... SKIP LOCKED (locked_read skips rows others hold) */
         HA_CAN_SKIP_LOCKED |
         /* CREATE SEQUENCE (the only use of the flag in the server): a sequence's
            row is written outside the connection's transaction (sequence.cc) */
         HA_CAN_TABLES_WITHOUT_ROLLBACK |
         /* FLUSH TABLES ... FOR EXPORT (transport.h) */
         HA_CAN_EXPORT |
         /* unique keys checked in creation order, not the server's (after an in-place
            ADD UNIQUE): REPLACE must not take the first duplicate for the last key */
         (unique_keys_reordered() ? HA_DUPLICATE_KEY_NOT_IN_ORDER : 0);
}

/* The engine indexes of the unique keys the engine checks (not the server's
   long-hash ones), in the server's key order, reordered in the engine? */
bool ha_tidesdb::unique_keys_reordered() const {
  if (!m_tbl || !table_share) return false;
  /* Fixed while the table is open (an ALTER that reorders keys reopens it); the
     server asks for table_flags many times per statement. */
  if (m_unique_reordered >= 0) return m_unique_reordered;
  std::vector<uint32_t> unique;
  for (uint k = 0; k < table_share->keys; k++) {
    const KEY &key = table_share->key_info[k];
    if ((key.flags & HA_NOSAME) && key.algorithm != HA_KEY_ALG_LONG_HASH &&
        k < m_key_to_engine.size())
      unique.push_back(m_key_to_engine[k]);
  }
  m_unique_reordered =
      tdb_table_dup_keys_not_in_order(m_tbl, unique.data(), (uint32_t)unique.size()) ? 1 : 0;
  return m_unique_reordered;
}

bool tidesdb::part_is_covered(const KEY_PART_INFO *kp) {
  const Field *f = kp->field;
  return f && !(f->flags & BLOB_FLAG) && !(kp->key_part_flag & HA_PART_KEY_SEG) &&
         f->key_length() == kp->length;
}

ulong ha_tidesdb::index_flags(uint idx, uint part, bool all_parts) const {
  ulong flags = HA_READ_NEXT | HA_READ_PREV | HA_READ_ORDER | HA_READ_RANGE;
  if (!table_share || idx >= table_share->keys) return flags;
  if (is_fulltext(&table_share->key_info[idx])) return 0; /* read by ft_read only */
  const KEY *key = &table_share->key_info[idx];
  if (idx == table_share->primary_key) {
    /* The row holds every column. A key with a prefix (or BLOB) part gets
       PREFIX_PK_FLAGS (server_compat.h): a clustered key makes the server expect an
       index-only read of another key to put the key's columns in the record (index
       merge filters those rows by the key's ranges), and an entry carries only the
       encoded prefix (reads_pk_prefix_column). While the server
       opens the share it asks per part, before the later parts have their field
       (table.cc): those are judged by the share's field of their fieldnr, or else
       the key would look not whole and its first parts get HA_KEYREAD_ONLY. */
    bool whole = true;
    for (uint p = 0; p < key->user_defined_key_parts; p++) {
      KEY_PART_INFO kp = key->key_part[p];
      if (!kp.field && kp.fieldnr && kp.fieldnr <= table_share->fields)
        kp.field = table_share->field[kp.fieldnr - 1];
      whole = whole && part_is_covered(&kp);
    }
    return flags | (whole ? tidesdb_compat::CLUSTERED_PK_FLAGS : tidesdb_compat::PREFIX_PK_FLAGS);
  }
  /* A window search: forward only, in no useful order, never index-only. */
  if (is_spatial(key)) return HA_READ_NEXT | HA_READ_RANGE | HA_KEY_SCAN_NOT_ROR;
  /* Extended keys: parts past the user parts are the primary key columns the
     entry carries after its own (whole columns: covered). */
  if (part >= std::max(key->user_defined_key_parts, key->ext_key_parts)) return flags;
  bool covered = true;
  for (uint p = all_parts ? 0 : part; p <= part && covered; p++)
    covered = part_is_covered(&key->key_part[p]);
  /* Secondary keys take pushed index conditions (icp.cc). */
  flags |= HA_DO_INDEX_COND_PUSHDOWN;
  return covered ? flags | HA_KEYREAD_ONLY : flags;
}

/* The fields an entry of secondary key keynr carries (see Format). */
void tidesdb::covered_fields(TABLE *table, uint keynr, bool hidden_pk,
                           std::vector<Field *> *out) {
  out->clear();
  auto add = [&](const KEY *key) {
    for (uint p = 0; p < key->user_defined_key_parts; p++) {
      const KEY_PART_INFO *kp = &key->key_part[p];
      if (!part_is_covered(kp)) continue;
      Field *f = table->field[kp->fieldnr - 1];
      bool seen = false;
      for (Field *g : *out) seen |= g == f;
      if (!seen) out->push_back(f);
    }
  };
  add(&table->key_info[keynr]);
  if (!hidden_pk) add(&table->key_info[table->s->primary_key]);
}

/* ------------------------------------------------------------------------- DDL */

int ha_tidesdb::create(const char *name, TABLE *form, HA_CREATE_INFO *info) {
  /* A constraint the engine does not enforce is refused, never dropped. */
  if (int err = fk_refuse_unsupported(ha_thd())) return err;
  /* As InnoDB: fixed-length and Aria's PAGE row formats do not exist here (the
     others are accepted and mean the same single row format). */
  if (info->row_type == ROW_TYPE_FIXED || info->row_type == ROW_TYPE_PAGE) {
    my_error(ER_ILLEGAL_HA_CREATE_OPTION, MYF(0), "TidesDB", "ROW_TYPE");
    return HA_WRONG_CREATE_OPTION;
  }
  /* Every table's files live in the engine's own directory (<datadir>/#tidesdb, one
     set of files for all tables): a DATA DIRECTORY cannot be honoured, so it is
     refused rather than dropped. INDEX DIRECTORY is ignored with a warning, as
     InnoDB does. */
  if (info->data_file_name) {
    my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION,
                    "TidesDB keeps every table in <datadir>/#tidesdb: DATA DIRECTORY is not "
                    "supported",
                    MYF(0));
    return HA_WRONG_CREATE_OPTION;
  }
  if (info->index_file_name)
    push_warning_printf(ha_thd(), Sql_condition::WARN_LEVEL_WARN, WARN_OPTION_IGNORED,
                        ER_THD(ha_thd(), WARN_OPTION_IGNORED), "INDEX DIRECTORY");
  uint keys = form->s->keys;
  uint n_indexes = keys - (form->s->primary_key < MAX_KEY ? 1 : 0);
  ulonglong auto_inc = info->auto_increment_value ? info->auto_increment_value : 1;
  tdb_table_options opts;
  table_options_of(form->s, &opts);
  if (tidesdb_encrypt_tables == TIDESDB_ENCRYPT_FORCE && !opts.encrypted) {
    my_printf_error(ER_ILLEGAL_HA_CREATE_OPTION,
                    "TidesDB: tidesdb_encrypt_tables=FORCE: a table cannot be ENCRYPTED=NO",
                    MYF(0));
    return HA_WRONG_CREATE_OPTION;
  }
  /* Version 1 of the rows' columns: each stored field's id is its field index
     (row_codec.h). */
  std::vector<uint32_t> ids;
  std::vector<uint8_t> flags;
  for (Field **fp = form->field; *fp; fp++) {
    if (!(*fp)->stored_in_db()) continue;
    ids.push_back((*fp)->field_index);
    flags.push_back((*fp)->flags & BLOB_FLAG ? TDB_COLUMN_BLOB : 0);
  }
  int st = tdb_table_create_columns(name, n_indexes, auto_inc, &opts, ids.data(), flags.data(),
                                    ids.size());
  if (st == TDB_READ_ONLY) {
    /* the server's own error would say only "errno: 602"; say why */
    int err = fail(st);
    my_error(ER_GET_ERRMSG, MYF(0), err, m_last_error.c_str(), "TidesDB");
    return err;
  }
  if (st) return fail(st);
  st = fk_register_keys(name, form);
  int err = st ? fail(st) : fk_define(ha_thd(), name);
  if (!err) err = ft_fix_index_settings(ha_thd(), name, form);
  if (err) tdb_table_drop(name);
  return err;
}

int ha_tidesdb::delete_table(const char *name) {
  m_fk_error.clear(); /* InnoDB's DROP TABLE error names no constraint */
  if (int err = fk_check_drop(ha_thd(), name)) return err;
  int st = tdb_table_drop(name);
  return st ? fail(st) : 0;
}

int ha_tidesdb::rename_table(const char *from, const char *to) {
  int st = tdb_table_rename(from, to, statement_lock_wait_ms(ha_thd()));
  return st ? fail(st) : 0;
}

int ha_tidesdb::truncate() {
  close_cursor();
  int st = tdb_table_truncate(m_name.c_str());
  if (st) return fail(st);
  /* The engine dropped the saved statistics with the rows, as InnoDB's
     TRUNCATE (a new table) starts without any. */
  if (m_share) m_share->forget_statistics();
  /* The FULLTEXT indexes' settings went with their entries: recorded again from
     the session, as InnoDB's TRUNCATE builds a new table's indexes. */
  return ft_fix_index_settings(ha_thd(), m_name.c_str(), table);
}

void ha_tidesdb::update_create_info(HA_CREATE_INFO *info) {
  if (!(info->used_fields & HA_CREATE_USED_AUTO) && table->found_next_number_field) {
    info->auto_increment_value = ensure_auto_increment_seeded();
  }
}

/* ------------------------------------------------------------------ open / lock */

int ha_tidesdb::open(const char *name, int, uint) {
  m_name = name;
  if (!(m_share = static_cast<Tidesdb_share *>(get_ha_share_ptr()))) {
    lock_shared_ha_data();
    m_share = static_cast<Tidesdb_share *>(get_ha_share_ptr());
    if (!m_share) {
      m_share = new Tidesdb_share();
      set_ha_share_ptr(m_share);
    }
    unlock_shared_ha_data();
  }
  thr_lock_data_init(&m_share->lock, &m_lock, NULL);

  int st = tdb_table_open(name, &m_tbl);
  if (st) return fail(st);

  uint n_keys = table->s->keys;
  m_hidden_pk = table->s->primary_key >= MAX_KEY;
  uint expected = n_keys - (m_hidden_pk ? 0 : 1);
  if (tdb_table_index_count(m_tbl) != expected) {
    m_last_error = "the engine's catalog and the table definition disagree on the index count";
    sql_print_error("TidesDB: %s (table %s)", m_last_error.c_str(), name);
    return HA_ERR_TIDESDB_CORRUPTION;
  }
  {
    size_t n = 0;
    std::vector<uint32_t> flat;
    st = tdb_table_columns(m_tbl, nullptr, 0, &n);
    if (!st) {
      flat.resize(n);
      st = tdb_table_columns(m_tbl, flat.data(), n, &n);
    }
    if (st) return fail(st);
    if (!m_layout.load(table, flat)) {
      m_last_error = "the engine's catalog and the table definition disagree on the columns";
      sql_print_error("TidesDB: %s (table %s)", m_last_error.c_str(), name);
      return HA_ERR_TIDESDB_CORRUPTION;
    }
  }
  /* Tables created before constraints existed record their keys now. */
  if ((st = fk_register_keys(name, table))) return fail(st);
  m_key_to_engine.assign(n_keys, 0);
  m_unique_reordered = -1;
  uint next = 1;
  for (uint k = 0; k < n_keys; k++) m_key_to_engine[k] = is_pk(k) ? 0 : next++;
  m_key_fully_covered.assign(n_keys, true);
  for (uint k = 0; k < n_keys; k++) {
    const KEY &key = table->key_info[k];
    for (uint p = 0; p < key.user_defined_key_parts; p++)
      if (!part_is_covered(&key.key_part[p])) m_key_fully_covered[k] = false;
  }

  m_pk_len = m_hidden_pk ? HIDDEN_PK_LEN
                         : max_encoded_length(&table->key_info[table->s->primary_key],
                                              table->key_info[table->s->primary_key]
                                                  .user_defined_key_parts);
  ref_length = m_pk_len;
  /* A table scan reads the primary key's family in key order (as InnoDB's
     clustered index does): UPDATE/DELETE plans then see which key a scan uses,
     so an UPDATE of the primary key reads its rows first ("Using buffer"),
     the same plan, warnings and errors as InnoDB. */
  key_used_on_scan = m_hidden_pk ? MAX_KEY : table->s->primary_key;
  m_scratch_rec = (uchar *)my_malloc(PSI_NOT_INSTRUMENTED, table->s->rec_buff_length,
                                     MYF(MY_WME | MY_ZEROFILL));
  if (!m_scratch_rec) return HA_ERR_OUT_OF_MEM;
  m_entries.resize(n_keys);
  m_covered.assign(n_keys, std::vector<Field *>());
  for (uint k = 0; k < n_keys; k++)
    if (!is_pk(k)) covered_fields(table, k, m_hidden_pk, &m_covered[k]);
  info(HA_STATUS_VARIABLE | HA_STATUS_CONST);
  return 0;
}

int ha_tidesdb::close() {
  close_cursor();
  fk_forget();
  if (m_tbl) {
    tdb_table_close(m_tbl);
    m_tbl = nullptr;
  }
  return 0;
}

int ha_tidesdb::external_lock(THD *thd, int lock_type) {
  if (lock_type == F_UNLCK) {
    close_cursor();
    if (m_exported) {
      m_exported = false;
      int st = tdb_table_export_end(m_name.c_str());
      if (st) sql_print_warning("TidesDB: %s", tdb_last_error());
    }
    return 0;
  }
  /* As InnoDB: a discarded table is neither read nor written, except by the
     DISCARD / IMPORT itself (thd_tablespace_op). */
  if (m_tbl && !thd_tablespace_op(thd) && tdb_table_is_discarded(m_tbl)) {
    my_error(ER_TABLESPACE_DISCARDED, MYF(0), table->s->table_name.str);
    return HA_ERR_TABLESPACE_MISSING;
  }
  if (tidesdb::is_export_lock(thd, lock_type)) {
    std::vector<std::string> lines = tidesdb::definition_lines(table);
    std::vector<const char *> ptrs;
    for (const std::string &l : lines) ptrs.push_back(l.c_str());
    int st = tdb_table_export(m_tbl, m_name.c_str(), ptrs.data(), ptrs.size());
    if (st) return fail(st);
    m_exported = true;
  }
  tdb_trx *t;
  int st = begin_statement(thd, &t);
  if (st) return fail(st);
  m_autoinc_rows = 0;
  fk_forget();
  maybe_recalc_statistics(thd);
  if (m_share && m_stats_version != m_share->stats_version) apply_statistics();
  /* SERIALIZABLE: plain reads inside a transaction lock what they read in shared
     mode, as InnoDB does. */
  if (m_lock_rows == ROW_LOCK_NONE && thd_tx_isolation(thd) == ISO_SERIALIZABLE &&
      thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN) && !is_sequence())
    m_lock_rows = ROW_LOCK_SHARED;
  return 0;
}

int ha_tidesdb::start_stmt(THD *thd, thr_lock_type) {
  tdb_trx *t;
  int st = begin_statement(thd, &t);
  if (st) return fail(st);
  m_autoinc_rows = 0;
  fk_forget();
  return 0;
}

/* As InnoDB (ha_innobase::store_lock): a statement that writes reads its other
   tables (the source of INSERT ... SELECT and CREATE TABLE ... SELECT, the tables of
   subqueries and joins of UPDATE / DELETE / INSERT) with shared locking reads, next-key
   locks included in REPEATABLE READ and SERIALIZABLE, so what it read cannot change
   or appear before it commits (and statement binlog replays it alike). In READ
   COMMITTED and below, INSERT ... SELECT, REPLACE ... SELECT, UPDATE and
   CREATE ... SELECT read a consistent snapshot instead. */
static bool locks_rows_it_reads(THD *thd, thr_lock_type lock_type) {
  if (lock_type != TL_READ && lock_type != TL_READ_NO_INSERT) return false;
  switch (thd_sql_command(thd)) {
  case SQLCOM_INSERT_SELECT:
  case SQLCOM_REPLACE_SELECT:
  case SQLCOM_UPDATE:
  case SQLCOM_CREATE_TABLE:
    return thd_tx_isolation(thd) > ISO_READ_COMMITTED;
  case SQLCOM_UPDATE_MULTI:
  case SQLCOM_DELETE_MULTI:
  case SQLCOM_DELETE:
  case SQLCOM_INSERT:
  case SQLCOM_REPLACE:
    return true;
  default:
    return false;
  }
}

THR_LOCK_DATA **ha_tidesdb::store_lock(THD *thd, THR_LOCK_DATA **to,
                                       enum thr_lock_type lock_type) {
  /* What the statement's reads must lock: LOCK IN SHARE MODE takes shared row
     locks; FOR UPDATE, UPDATE and DELETE exclusive ones; the tables a writing
     statement only reads shared ones (locks_rows_it_reads). */
  if (lock_type != TL_IGNORE)
    m_skip_locked = lock_type == TL_READ_SKIP_LOCKED || lock_type == TL_WRITE_SKIP_LOCKED;
  if (lock_type == TL_READ_WITH_SHARED_LOCKS || lock_type == TL_READ_SKIP_LOCKED ||
      locks_rows_it_reads(thd, lock_type))
    m_lock_rows = ROW_LOCK_SHARED;
  else if (lock_type >= TL_WRITE_ALLOW_WRITE)
    m_lock_rows = ROW_LOCK_EXCLUSIVE;
  else if (lock_type != TL_IGNORE)
    m_lock_rows = ROW_LOCK_NONE;
  if (lock_type != TL_IGNORE && m_lock.type == TL_UNLOCK) {
    /* Let concurrent writers through the server's table lock, as InnoDB does: the
       engine isolates transactions itself. LOCK TABLES and tablespace operations
       keep the lock they asked for. */
    if (lock_type >= TL_WRITE_CONCURRENT_INSERT && lock_type <= TL_WRITE &&
        !thd_in_lock_tables(thd) && !thd_tablespace_op(thd))
      lock_type = TL_WRITE_ALLOW_WRITE;
    else if ((lock_type == TL_READ_NO_INSERT && !thd_in_lock_tables(thd)) ||
             lock_type == TL_READ_SKIP_LOCKED)
      lock_type = TL_READ;
    m_lock.type = lock_type;
  }
  /* A sequence's row is never locked (sequence.cc). */
  if (is_sequence()) {
    m_lock_rows = ROW_LOCK_NONE;
    m_skip_locked = false;
  }
  *to++ = &m_lock;
  return to;
}

int ha_tidesdb::reset() {
  close_cursor();
  return 0;
}

int ha_tidesdb::extra(enum ha_extra_function operation) {
  switch (operation) {
  case HA_EXTRA_PREPARE_FOR_DROP:
  case HA_EXTRA_PREPARE_FOR_RENAME:
  case HA_EXTRA_FORCE_REOPEN:
    close_cursor();
    break;
  default:
    break;
  }
  return 0;
}

/* ---------------------------------------------------------------------- writes */

void ha_tidesdb::encode_pk(const uchar *rec, std::string *out) {
  out->clear();
  KEY *pk = &table->key_info[table->s->primary_key];
  encode_key_from_record(table, pk, pk->user_defined_key_parts, rec, out);
}

void ha_tidesdb::encode_secondary(uint keynr, const uchar *rec, const std::string &pk,
                                  Index_entry *out) {
  encode_entry(table, keynr, m_covered[keynr], rec, pk, out);
}

void ha_tidesdb::encode_entry(TABLE *table, uint keynr, const std::vector<Field *> &fields,
                              const uchar *rec, const std::string &pk, Index_entry *out) {
  encode_entry(table, &table->key_info[keynr], fields, rec, pk, out);
}

void ha_tidesdb::encode_entry(TABLE *table, KEY *key, const std::vector<Field *> &fields,
                              const uchar *rec, const std::string &pk, Index_entry *out,
                              bool as_version_1) {
  out->key.clear();
  if (is_spatial(key)) {
    out->unique = false;
    encode_spatial_entry(key, rec, pk, &out->key, &out->value);
    return;
  }
  bool any_null =
      encode_key_from_record(table, key, key->user_defined_key_parts, rec, &out->key);
  /* NULL never equals NULL, so a key with a NULL part never clashes. */
  out->unique = (key->flags & HA_NOSAME) && !any_null;
  out->value.clear();
  out->value.push_back((char)((as_version_1 ? ENTRY_FORMAT_V1 : ENTRY_FORMAT_V2) |
                               (out->unique ? ENTRY_UNIQUE : 0)));
  if (out->unique)
    out->value.append(pk);
  else
    out->key.append(pk);
  const KEY *pk_key =
      table->s->primary_key < MAX_KEY ? &table->key_info[table->s->primary_key] : nullptr;
  my_ptrdiff_t diff = rec - table->record[0];
  for (Field *f : fields) {
    if (f->is_null_in_record(rec)) {
      out->value.push_back(COLUMN_NULL);
      continue;
    }
    Image_part src;
    if (!as_version_1 && image_part_of(key, pk_key, f, &src) &&
        image_decodes_to_itself(f, rec, table)) {
      out->value.push_back(COLUMN_IN_KEY);
      continue;
    }
    out->value.push_back(COLUMN_PACKED);
    size_t at = out->value.size();
    out->value.resize(at + f->pack_length() + 8);
    f->move_field_offset(diff);
    uchar *end = f->pack((uchar *)&out->value[at], f->ptr, UINT_MAX);
    f->move_field_offset(-diff);
    out->value.resize((size_t)(end - (uchar *)&out->value[0]));
  }
}

bool ha_tidesdb::unpack_entry_columns(uchar *buf, const uint8_t *key, size_t key_len,
                                      const uint8_t *value, size_t value_len) {
  if (value_len < 1 || !is_entry_format(value[0])) return false;
  bool v2 = (value[0] & ENTRY_VERSION_MASK) == ENTRY_FORMAT_V2;
  bool unique = value[0] & ENTRY_UNIQUE;
  const uchar *p = value + 1 + (unique ? m_pk_len : 0);
  const uchar *end = value + value_len;
  if (p > end || (!unique && key_len < m_pk_len)) return false;
  /* Where tag 2 finds its images: the key's own parts, then the primary key. */
  const uchar *pk = unique ? value + 1 : key + key_len - m_pk_len;
  size_t parts_len = unique ? key_len : key_len - m_pk_len;
  const KEY *index = &table->key_info[m_cursor_key];
  const KEY *pk_key = m_hidden_pk ? nullptr : &table->key_info[table->s->primary_key];
  my_ptrdiff_t diff = buf - table->record[0];
  for (Field *f : m_covered[m_cursor_key]) {
    if (p >= end) return false;
    uchar tag = *p++;
    if (tag == COLUMN_NULL) {
      f->move_field_offset(diff);
      f->set_null();
      f->move_field_offset(-diff);
      continue;
    }
    if (tag == COLUMN_IN_KEY && v2) {
      Image_part src;
      if (!image_part_of(index, pk_key, f, &src)) return false;
      bool in_pk = src.key != index;
      const uchar *img = in_pk ? part_image(src.key->key_part, src.key->user_defined_key_parts,
                                            src.part, pk, m_pk_len)
                               : part_image(src.key->key_part, src.key->user_defined_key_parts,
                                            src.part, key, parts_len);
      uchar image[64];
      uint len = f->sort_length();
      if (!img || len > sizeof(image)) return false;
      bool desc = src.key->key_part[src.part].key_part_flag & HA_REVERSE_SORT;
      for (uint i = 0; i < len; i++) image[i] = desc ? (uchar)~img[i] : img[i];
      f->move_field_offset(diff);
      f->set_notnull();
      bool ok = decode_sort_image(f, image, f->ptr);
      f->move_field_offset(-diff);
      if (!ok) return false;
      continue;
    }
    if (tag != COLUMN_PACKED) return false;
    f->move_field_offset(diff);
    f->set_notnull();
    const uchar *next = f->unpack(f->ptr, p, end, 0);
    f->move_field_offset(-diff);
    if (next == NULL || next > end) return false;
    p = next;
  }
  return p == end;
}

bool ha_tidesdb::pk_of_entry(const uint8_t *key, size_t key_len, const uint8_t *value,
                             size_t value_len, const uint8_t **pk) const {
  if (value_len < 1 || !is_entry_format(value[0])) return false;
  if (value[0] & ENTRY_UNIQUE) {
    if (value_len < 1 + (size_t)m_pk_len) return false;
    *pk = value + 1;
    return true;
  }
  if (key_len < m_pk_len) return false;
  *pk = key + key_len - m_pk_len;
  return true;
}

int ha_tidesdb::apply_ops(std::vector<tdb_op> &ops, const std::vector<uint> &op_keys) {
  size_t failed = 0;
  int st = tdb_apply(trx(), m_tbl, ops.data(), ops.size(), &failed);
  /* A sequence's write is committed at once, never rolled back (sequence.cc). */
  if (is_sequence()) st = sequence_commit(st);
  if (st == TDB_DUPLICATE) {
    m_dup_key = failed < op_keys.size() ? op_keys[failed] : 0;
    errkey = m_dup_key;
    return HA_ERR_FOUND_DUPP_KEY;
  }
  return st ? fail(st) : 0;
}

/* Every key a write touches is locked until the transaction ends. For rows and
   unique entries that is what makes writers of the same row or value wait; for
   the other index entries (whose row lock already serialises their writers) it
   makes the engine check them for conflicts from the lock on instead of from the
   snapshot, so an UPDATE of a row committed after the snapshot commits, as in
   InnoDB. */
tdb_op tidesdb::put_op(uint32_t index, const std::string &key, const std::string &value,
                      size_t unique_len) {
  tdb_op op;
  op.index = index;
  op.kind = TDB_OP_PUT;
  op.lock = 1;
  op.key = (const uint8_t *)key.data();
  op.key_len = key.size();
  op.value = (const uint8_t *)value.data();
  op.value_len = value.size();
  op.unique_len = unique_len;
  return op;
}

tdb_op tidesdb::delete_op(uint32_t index, const std::string &key) {
  tdb_op op;
  op.index = index;
  op.kind = TDB_OP_DELETE;
  op.lock = 1;
  op.key = (const uint8_t *)key.data();
  op.key_len = key.size();
  op.value = nullptr;
  op.value_len = 0;
  op.unique_len = 0;
  return op;
}

int ha_tidesdb::write_row(const uchar *buf) {
  if (table->next_number_field && buf == table->record[0]) {
    if (int err = update_auto_increment()) return err;
  }
  std::string pk;
  if (m_hidden_pk) {
    uint64_t rowid = tdb_table_next_rowid(m_tbl);
    if (rowid == 0) return fail(TDB_INTERNAL);
    pk.resize(HIDDEN_PK_LEN);
    mi_int8store((uchar *)&pk[0], rowid);
  } else {
    encode_pk(buf, &pk);
  }
  if (int err = fk_check_child(nullptr, buf)) return err;
  std::vector<tdb_op> external_ops;
  std::deque<std::string> bufs;
  if (int err = encode_row_change(nullptr, pk, buf, &external_ops, &bufs)) return err;

  std::vector<tdb_op> ops;
  std::vector<uint> op_keys;
  ops.reserve(table->s->keys + 1 + external_ops.size());
  ops.push_back(put_op(0, pk, m_row_buf, m_hidden_pk ? 0 : pk.size()));
  op_keys.push_back(m_hidden_pk ? MAX_KEY : table->s->primary_key);
  for (uint k = 0; k < table->s->keys; k++) {
    if (is_pk(k) || ft_ops(k, nullptr, pk, buf, pk, &ops, &op_keys)) continue;
    Index_entry &e = m_entries[k];
    encode_secondary(k, buf, pk, &e);
    if (is_spatial(&table->key_info[k])) {
      if (int err = spatial_note(k, e.value)) return err;
    }
    ops.push_back(put_op(engine_index(k), e.key, e.value, e.unique ? e.key.size() : 0));
    /* A new row's non-unique entry (key columns + primary key) is a key no other
       transaction can write without holding this row's lock: locking it too would
       only cost time and memory in bulk inserts. Unlocked after the locked row,
       the engine checks it for conflicts from the row lock on (see tdb_op.lock). */
    if (!e.unique) ops.back().lock = 0;
    op_keys.push_back(k);
  }
  if (m_share->online_active.load(std::memory_order_acquire))
    online_index_ops(nullptr, nullptr, buf, &pk, &ops, &op_keys);
  for (const tdb_op &op : external_ops) {
    ops.push_back(op);
    op_keys.push_back(MAX_KEY);
  }
  forget_external_state();
  int err = apply_ops(ops, op_keys);
  if (!err) err = wsrep_row_keys(TDB_WSREP_INSERT, ops, op_keys, nullptr, buf);
  if (table->next_number_field && m_autoinc_rows > 0) m_autoinc_rows--;
  if (!err) {
    m_last_pk = pk;
    observe_auto_increment(buf);
    count_event(ROWS_INSERTED);
    note_row_change();
  } else if (err == HA_ERR_FOUND_DUPP_KEY && (m_hidden_pk || m_dup_key != table->s->primary_key)) {
    /* As InnoDB, whose clustered index took the row before a secondary unique key
       refused it: its persisted counter covers the value (a restart starts past
       it), the counter in memory does not move. */
    observe_auto_increment(buf, true);
  }
  return err;
}

/* True if every stored column of the two rows is the same (and was read:
   a column outside read_set may hold anything in old_data). */
static bool rows_identical(TABLE *table, const uchar *old_data, const uchar *new_data) {
  my_ptrdiff_t to_new = new_data - table->record[0];
  my_ptrdiff_t to_old = old_data - new_data;
  for (Field **fp = table->field; *fp; fp++) {
    Field *f = *fp;
    if (!f->stored_in_db()) continue;
    if (!bitmap_is_set(table->read_set, f->field_index)) return false;
    f->move_field_offset(to_new);
    bool same = f->is_null() == f->is_null(to_old) &&
                (f->is_null() || f->cmp_binary(f->ptr, f->ptr + to_old) == 0);
    f->move_field_offset(-to_new);
    if (!same) return false;
  }
  return true;
}

int ha_tidesdb::update_row(const uchar *old_data, const uchar *new_data) {
  /* As InnoDB: an update that changes nothing writes nothing and says so
     (REPLACE of an identical row then counts 1 affected row, not 2). */
  if (rows_identical(table, old_data, new_data)) return HA_ERR_RECORD_IS_THE_SAME;
  if (int err = fk_check_parent(old_data, new_data)) return err;
  if (int err = fk_check_child(old_data, new_data)) return err;
  std::string old_pk, new_pk;
  if (m_hidden_pk) {
    old_pk = m_last_pk;
    new_pk = m_last_pk;
  } else {
    encode_pk(old_data, &old_pk);
    encode_pk(new_data, &new_pk);
  }
  std::vector<tdb_op> external_ops;
  std::deque<std::string> bufs;
  if (int err = encode_row_change(&old_pk, new_pk, new_data, &external_ops, &bufs)) return err;
  bool pk_changed = old_pk != new_pk;

  std::vector<tdb_op> ops;
  std::vector<uint> op_keys;
  std::vector<Index_entry> old_entries(table->s->keys);
  ops.reserve(2 * table->s->keys + 2);
  uint pk_keynr = m_hidden_pk ? MAX_KEY : table->s->primary_key;
  if (pk_changed) {
    ops.push_back(delete_op(0, old_pk));
    op_keys.push_back(pk_keynr);
  }
  ops.push_back(put_op(0, new_pk, m_row_buf, pk_changed ? new_pk.size() : 0));
  op_keys.push_back(pk_keynr);
  for (uint k = 0; k < table->s->keys; k++) {
    if (is_pk(k) || ft_ops(k, old_data, old_pk, new_data, new_pk, &ops, &op_keys)) continue;
    Index_entry &old_e = old_entries[k], &new_e = m_entries[k];
    encode_secondary(k, old_data, old_pk, &old_e);
    encode_secondary(k, new_data, new_pk, &new_e);
    if (old_e == new_e) continue;
    if (is_spatial(&table->key_info[k])) {
      if (int err = spatial_note(k, new_e.value)) return err;
    }
    if (old_e.key == new_e.key && old_e.unique == new_e.unique) {
      /* Only the covered columns changed (e.g. 'a' -> 'A' under a _ci collation):
         overwrite the entry. */
      ops.push_back(put_op(engine_index(k), new_e.key, new_e.value, 0));
      op_keys.push_back(k);
      continue;
    }
    ops.push_back(delete_op(engine_index(k), old_e.key));
    op_keys.push_back(k);
    ops.push_back(put_op(engine_index(k), new_e.key, new_e.value,
                         new_e.unique ? new_e.key.size() : 0));
    op_keys.push_back(k);
  }
  if (m_share->online_active.load(std::memory_order_acquire))
    online_index_ops(old_data, &old_pk, new_data, &new_pk, &ops, &op_keys);
  for (const tdb_op &op : external_ops) {
    ops.push_back(op);
    op_keys.push_back(MAX_KEY);
  }
  forget_external_state();
  int err = apply_ops(ops, op_keys);
  if (!err) err = wsrep_row_keys(TDB_WSREP_UPDATE, ops, op_keys, old_data, new_data);
  if (!err) {
    observe_auto_increment(new_data);
    m_last_pk = new_pk;
    count_event(ROWS_UPDATED);
    note_row_change();
  }
  return err;
}

int ha_tidesdb::delete_row(const uchar *buf) {
  if (int err = fk_check_parent(buf, nullptr)) return err;
  std::string pk;
  if (m_hidden_pk)
    pk = m_last_pk;
  else
    encode_pk(buf, &pk);
  std::vector<tdb_op> ops;
  std::vector<uint> op_keys;
  ops.push_back(delete_op(0, pk));
  op_keys.push_back(MAX_KEY);
  for (uint k = 0; k < table->s->keys; k++) {
    if (is_pk(k) || ft_ops(k, buf, pk, nullptr, pk, &ops, &op_keys)) continue;
    encode_secondary(k, buf, pk, &m_entries[k]);
    ops.push_back(delete_op(engine_index(k), m_entries[k].key));
    op_keys.push_back(k);
  }
  if (m_share->online_active.load(std::memory_order_acquire))
    online_index_ops(buf, &pk, nullptr, nullptr, &ops, &op_keys);
  std::deque<std::string> bufs;
  size_t before = ops.size();
  external_deletes(pk, &ops, &bufs);
  op_keys.resize(op_keys.size() + (ops.size() - before), MAX_KEY);
  forget_external_state();
  int err = apply_ops(ops, op_keys);
  if (!err) err = wsrep_row_keys(TDB_WSREP_DELETE, ops, op_keys, buf, nullptr);
  if (!err) {
    count_event(ROWS_DELETED);
    note_row_change();
  }
  return err;
}

/* ------------------------------------------------- external BLOB/TEXT values */

const External_state *ha_tidesdb::external_state_for(const std::string &row_key) const {
  const External_state *best = nullptr;
  for (const External_state &st : m_external)
    if (st.valid && st.row_key == row_key && (!best || st.seq > best->seq)) best = &st;
  return best;
}

void ha_tidesdb::external_deletes(const std::string &pk, std::vector<tdb_op> *ops,
                                  std::deque<std::string> *bufs) {
  const External_state *st = external_state_for(pk);
  if (!table->s->blob_fields) {
    orphan_deletes(pk, st, ops, bufs);
    return;
  }
  for (Field **fp = table->field; *fp; fp++) {
    Field *f = *fp;
    if (!f->stored_in_db() || !(f->flags & BLOB_FLAG)) continue;
    /* Without facts about the row, delete blindly: a tombstone is cheap. */
    if (st && st->length[f->field_index] == NOT_EXTERNAL) continue;
    bufs->emplace_back();
    external_key(pk, m_layout.column_no(f), &bufs->back());
    ops->push_back(delete_op(TDB_BLOB_INDEX, bufs->back()));
  }
  orphan_deletes(pk, st, ops, bufs);
}

/* The external values of columns dropped since the row was written (known from
   its last decode, else every such column's, blindly). */
void ha_tidesdb::orphan_deletes(const std::string &pk, const External_state *st,
                                std::vector<tdb_op> *ops, std::deque<std::string> *bufs) {
  for (uint32_t column : st ? st->orphans : m_layout.dropped_blobs()) {
    bufs->emplace_back();
    external_key(pk, column, &bufs->back());
    ops->push_back(delete_op(TDB_BLOB_INDEX, bufs->back()));
  }
}

/* Rules for an external value of the old row (a column not in write_set is one
   the statement does not change):
   - not in write_set, same row key: keep the stored value, rewrite nothing;
   - not in write_set, new row key: move it (its bytes come from the record if they
     were read, else from the engine);
   - in write_set: delete it; the new value is written by the encoding if it is
     long enough to be external (a put after the delete of the same key wins). */
int ha_tidesdb::encode_row_change(const std::string *old_pk, const std::string &new_pk,
                                  const uchar *new_data, std::vector<tdb_op> *external_ops,
                                  std::deque<std::string> *bufs) {
  Row_externals &ext = m_row_externals;
  ext.keep.clear();
  if (old_pk) orphan_deletes(*old_pk, external_state_for(*old_pk), external_ops, bufs);
  if (!table->s->blob_fields) {
    encode_row(table, m_layout, new_data, &m_row_buf, nullptr);
    return 0;
  }
  if (old_pk) {
    const External_state *st = external_state_for(*old_pk);
    bool key_changed = *old_pk != new_pk;
    ext.keep.assign(table->s->fields, NOT_EXTERNAL);
    for (Field **fp = table->field; *fp; fp++) {
      Field *f = *fp;
      if (!f->stored_in_db() || !(f->flags & BLOB_FLAG)) continue;
      uint idx = f->field_index;
      int64_t old_len = NOT_EXTERNAL;
      bool loaded = false;
      std::string probed;
      if (st) {
        old_len = st->length[idx];
        loaded = st->loaded[idx];
      } else {
        /* No facts about the old row (it was not read through this handler):
           ask the engine whether the value is external. */
        int rs = read_external(trx(), m_tbl, *old_pk, m_layout.column_no(f), true, &probed);
        if (rs && rs != TDB_NOT_FOUND) return fail(rs);
        if (!rs) old_len = (int64_t)probed.size();
      }
      if (old_len == NOT_EXTERNAL) continue;
      bool changes = bitmap_is_set(table->write_set, idx);
      if (!changes && !key_changed) {
        ext.keep[idx] = old_len;
        continue;
      }
      bufs->emplace_back();
      external_key(*old_pk, m_layout.column_no(f), &bufs->back());
      external_ops->push_back(delete_op(TDB_BLOB_INDEX, bufs->back()));
      if (changes || loaded) continue; /* the record holds the value to write */
      /* Moved to the new row key without its bytes in the record. */
      if (probed.empty() && !st) return fail(TDB_INTERNAL);
      if (st) {
        int rs = read_external(trx(), m_tbl, *old_pk, m_layout.column_no(f), true, &probed);
        if (rs) return fail(rs == TDB_NOT_FOUND ? TDB_CORRUPTION : rs);
      }
      ext.keep[idx] = old_len;
      bufs->emplace_back();
      std::string &key = bufs->back();
      external_key(new_pk, m_layout.column_no(f), &key);
      bufs->emplace_back(std::move(probed));
      external_ops->push_back(put_op(TDB_BLOB_INDEX, key, bufs->back(), 0));
    }
  }
  encode_row(table, m_layout, new_data, &m_row_buf, &ext);
  for (const Row_externals::Value &v : ext.written) {
    bufs->emplace_back();
    std::string &key = bufs->back();
    external_key(new_pk, m_layout.column_no(table->field[v.field]), &key);
    tdb_op op = put_op(TDB_BLOB_INDEX, key, key, 0);
    op.value = v.data;
    op.value_len = v.len;
    external_ops->push_back(op);
  }
  return 0;
}

/* ------------------------------------------------------------- AUTO_INCREMENT */

void ha_tidesdb::observe_auto_increment(const uchar *rec, bool persist_only) {
  Field *f = table->found_next_number_field;
  if (!f) return;
  my_ptrdiff_t diff = rec - table->record[0];
  f->move_field_offset(diff);
  bool is_null = f->is_null();
  longlong v = f->val_int();
  bool is_unsigned = f->flags & UNSIGNED_FLAG;
  f->move_field_offset(-diff);
  if (is_null || (!is_unsigned && v <= 0)) return;
  ensure_auto_increment_seeded();
  if (persist_only)
    tdb_table_autoinc_persist(m_tbl, (uint64_t)v, f->get_max_int_value());
  else
    tdb_table_autoinc_observe(m_tbl, (uint64_t)v, f->get_max_int_value());
}

ulonglong ha_tidesdb::ensure_auto_increment_seeded() {
  uint64_t current = tdb_table_autoinc_peek(m_tbl);
  if (current) return current;
  Field *f = table->found_next_number_field;
  uint keynr = table->s->next_number_index;
  uint64_t next = 1;
  if (f && keynr < MAX_KEY) {
    /* The largest stored value: the last entry of the key led by the column. Read
       in a private transaction, so this works outside any statement too. */
    tdb_trx *t = tdb_trx_new();
    tdb_cursor *c = nullptr;
    bool desc = table->key_info[keynr].key_part[0].key_part_flag & HA_REVERSE_SORT;
    if (t && !tdb_trx_begin(t, TDB_ISO_READ_COMMITTED) &&
        !tdb_cursor_open(t, m_tbl, engine_index(keynr), &c) &&
        !tdb_cursor_seek(c, desc ? TDB_SEEK_FIRST : TDB_SEEK_LAST, nullptr, 0)) {
      const uint8_t *k, *v;
      size_t klen, vlen;
      if (!tdb_cursor_entry(c, &k, &klen, &v, &vlen)) {
        std::string row;
        bool found = true;
        if (engine_index(keynr) == 0) {
          row.assign((const char *)v, vlen);
        } else {
          const uint8_t *pk, *rv;
          size_t rlen;
          found = pk_of_entry(k, klen, v, vlen, &pk) && !tdb_get(t, m_tbl, 0, pk, m_pk_len, &rv, &rlen);
          if (found) row.assign((const char *)rv, rlen);
        }
        if (found && decode_row(table, m_layout, row, m_scratch_rec, nullptr, nullptr, nullptr)) {
          my_ptrdiff_t diff = m_scratch_rec - table->record[0];
          f->move_field_offset(diff);
          longlong val = f->is_null() ? 0 : f->val_int();
          bool is_unsigned = f->flags & UNSIGNED_FLAG;
          f->move_field_offset(-diff);
          if (is_unsigned || val > 0) next = (uint64_t)val + 1;
        }
      }
    }
    if (c) tdb_cursor_close(c);
    if (t) tdb_trx_free(t);
  }
  return tdb_table_autoinc_seed(m_tbl, next);
}

void ha_tidesdb::get_auto_increment(ulonglong offset, ulonglong increment,
                                    ulonglong nb_desired_values, ulonglong *first_value,
                                    ulonglong *nb_reserved_values) {
  ensure_auto_increment_seeded();
  /* As InnoDB: the first call of a statement reserves what the server asks for
     (its row estimate); a later call (after an explicit value moved past the
     interval) reserves only the rows the statement has left. */
  if (m_autoinc_rows == 0) m_autoinc_rows = nb_desired_values ? nb_desired_values : 1;
  /* An offset larger than the increment: the server then places values on the grid
     offset mod increment (compute_next_insert_id); reserve on that same grid, so
     the server does not move the value one more step (InnoDB gives 1100, not 1150,
     after 200, 500, 800 with increment 300 -> 50 and offset 200). */
  if (increment > 1 && offset > increment) offset = offset % increment ? offset % increment : increment;
  *first_value = tdb_table_autoinc_reserve(m_tbl, m_autoinc_rows, offset, increment,
                                           table->next_number_field->get_max_int_value());
  *nb_reserved_values = m_autoinc_rows;
}

void ha_tidesdb::release_auto_increment() { m_autoinc_rows = 0; }

/* ------------------------------------------------------------------- reading */

int ha_tidesdb::open_cursor(uint engine_idx) {
  /* Locking reads scan the latest committed state, as InnoDB's do: an UPDATE must
     also find rows committed after the transaction's snapshot. */
  bool latest = m_lock_rows != ROW_LOCK_NONE;
  if (m_cursor && m_cursor_index == engine_idx && m_cursor_latest == latest) return 0;
  close_cursor();
  /* SKIP LOCKED scans lock no gaps (a gap another transaction holds would stop
     them instead of being skipped). */
  if (m_skip_locked) tdb_trx_set_skip_locked(trx(), 1);
  int st = latest ? tdb_cursor_open_latest(trx(), m_tbl, engine_idx, &m_cursor)
                  : tdb_cursor_open(trx(), m_tbl, engine_idx, &m_cursor);
  if (m_skip_locked) tdb_trx_set_skip_locked(trx(), 0);
  if (st) {
    m_cursor = nullptr;
    return fail(st);
  }
  m_cursor_index = engine_idx;
  m_cursor_latest = latest;
  m_cursor_positioned = false;
  return 0;
}

void ha_tidesdb::close_cursor() {
  if (m_cursor) {
    tdb_cursor_close(m_cursor);
    m_cursor = nullptr;
  }
  m_cursor_positioned = false;
  /* A sequence's next read takes a fresh snapshot (sequence.cc). */
  sequence_trx_end();
}

int ha_tidesdb::unpack_row(uchar *buf, const uint8_t *value, size_t len) {
  int n = buf == table->record[1] ? 1 : 0;
  std::string &slot = m_value[n];
  slot.assign((const char *)value, len);
  External_state &st = m_external[n];
  st.valid = false;
  st.loaded.assign(table->s->fields, false);
  Engine_external_reader reader(trx(), m_tbl, table, m_last_pk, m_lock_rows != ROW_LOCK_NONE,
                                Engine_external_reader::WANT_NEEDED, &st);
  if (!decode_row(table, m_layout, slot, buf, &reader, &st.length, &st.orphans)) {
    if (reader.status) {
      if (reader.status != TDB_NOT_FOUND && reader.status != TDB_CORRUPTION)
        return fail(reader.status);
      m_last_error = reader.error;
      sql_print_error("TidesDB: %s (table %s)", m_last_error.c_str(), m_name.c_str());
      return HA_ERR_TIDESDB_CORRUPTION;
    }
    m_last_error = "a stored row does not match the table definition";
    sql_print_error("TidesDB: %s (table %s)", m_last_error.c_str(), m_name.c_str());
    return HA_ERR_TIDESDB_CORRUPTION;
  }
  st.row_key = m_last_pk;
  st.seq = ++m_external_seq;
  st.valid = true;
  count_event(ROWS_READ);
  return 0;
}

int ha_tidesdb::locked_read(uchar *buf, const uint8_t *pk, size_t pk_len) {
  const uint8_t *value;
  size_t len;
  if (m_skip_locked) tdb_trx_set_skip_locked(trx(), 1);
  int st = tdb_lock_row(trx(), m_tbl, pk, pk_len,
                        m_lock_rows == ROW_LOCK_SHARED ? TDB_LOCK_SHARED : TDB_LOCK_EXCLUSIVE,
                        &value, &len);
  if (m_skip_locked) tdb_trx_set_skip_locked(trx(), 0);
  /* SKIP LOCKED: a row another transaction holds is not there for this statement. */
  if (st == TDB_LOCK_TIMEOUT && m_skip_locked) return HA_ERR_KEY_NOT_FOUND;
  if (st) return fail(st);
  m_last_pk.assign((const char *)pk, pk_len);
  return unpack_row(buf, value, len);
}

int ha_tidesdb::read_row_by_pk(uchar *buf, const uint8_t *pk, size_t pk_len) {
  if (m_lock_rows != ROW_LOCK_NONE) return locked_read(buf, pk, pk_len);
  const uint8_t *value;
  size_t len;
  int st = tdb_get(trx(), m_tbl, 0, pk, pk_len, &value, &len);
  if (st) return fail(st);
  m_last_pk.assign((const char *)pk, pk_len);
  return unpack_row(buf, value, len);
}

/* Does the statement read a column of the primary key that an index entry holds only
   a prefix of (a prefix or BLOB part)? Then an index-only read must read the row:
   index merge positions rows and, on 11.x where such a key is clustered
   (PREFIX_PK_FLAGS), filters them by the key's ranges from the record. */
bool ha_tidesdb::reads_pk_prefix_column() const {
  if (m_hidden_pk || table->s->primary_key >= m_key_fully_covered.size() ||
      m_key_fully_covered[table->s->primary_key])
    return false;
  const KEY &pk = table->key_info[table->s->primary_key];
  for (uint p = 0; p < pk.user_defined_key_parts; p++) {
    const KEY_PART_INFO *kp = &pk.key_part[p];
    if (!part_is_covered(kp) && bitmap_is_set(table->read_set, kp->field->field_index))
      return true;
  }
  return false;
}

/* Returned by fetch_entry_row when a locking read finds the entry's row gone or no
   longer matching the entry: the cursor moves on. */
static const int ROW_GONE = -1;

int ha_tidesdb::fetch_entry_row(uchar *buf, const uint8_t *k, size_t klen, const uint8_t *v,
                                size_t vlen) {
  bool locking = m_lock_rows != ROW_LOCK_NONE;
  if (m_cursor_index == 0) {
    if (locking) {
      /* Lock, then read the latest version: a locking read (and UPDATE/DELETE)
         works on committed data, as in InnoDB. */
      int err = locked_read(buf, k, klen);
      return err == HA_ERR_KEY_NOT_FOUND ? ROW_GONE : err;
    }
    m_last_pk.assign((const char *)k, klen);
    return unpack_row(buf, v, vlen);
  }
  const uint8_t *pk;
  if (!pk_of_entry(k, klen, v, vlen, &pk)) {
    m_last_error = "an index entry does not hold a primary key";
    sql_print_error("TidesDB: %s (table %s)", m_last_error.c_str(), m_name.c_str());
    return HA_ERR_TIDESDB_CORRUPTION;
  }
  if (locking) {
    std::string entry_key((const char *)k, klen), pk_copy((const char *)pk, m_pk_len);
    int err = locked_read(buf, pk, m_pk_len);
    if (err == HA_ERR_KEY_NOT_FOUND) return ROW_GONE;
    if (err) return err;
    /* The latest version of the row may have left this index entry. A key on
       virtual columns is checked only when they can be computed here (the server
       computes them in record[0], for the columns it reads). */
    if (int vcols = recheck_virtual_parts(buf)) return vcols < 0 ? HA_ERR_INTERNAL_ERROR : 0;
    Index_entry now;
    encode_secondary(m_cursor_key, buf, pk_copy, &now);
    if (now.key != entry_key) return ROW_GONE;
    return index_cond_verdict(buf);
  }
  bool icp = pushed_idx_cond && pushed_idx_cond_keyno == m_cursor_key;
  /* Index-only only if the key's own columns all come back: index merge reads every
     key index-only, and the server then checks the range end (compare_key) and the
     primary key ranges on the record's key columns, which a prefix part (or a BLOB)
     cannot restore. Such a key's rows are read whole (mtr index_merge_prefix_pk). */
  bool index_only = keyread_enabled() && keyread == m_cursor_key &&
                    m_cursor_key < m_key_fully_covered.size() &&
                    m_key_fully_covered[m_cursor_key] && !reads_pk_prefix_column();
  if (icp || index_only) {
    /* Index-only read (the entry carries every column the server reads), or the
       pushed condition checked on the entry before the row is read. */
    if (!unpack_entry_columns(buf, k, klen, v, vlen)) {
      m_last_error = "an index entry does not match the table definition";
      sql_print_error("TidesDB: %s (table %s)", m_last_error.c_str(), m_name.c_str());
      return HA_ERR_TIDESDB_CORRUPTION;
    }
    if (int verdict = index_cond_verdict(buf)) return verdict;
    if (index_only) {
      m_last_pk.assign((const char *)pk, m_pk_len);
      count_event(ROWS_READ);
      return 0;
    }
  }
  int err = read_row_by_pk(buf, pk, m_pk_len);
  if (err == HA_ERR_KEY_NOT_FOUND) {
    m_last_error = "an index entry points to a missing row";
    sql_print_error("TidesDB: %s (table %s)", m_last_error.c_str(), m_name.c_str());
    return HA_ERR_TIDESDB_CORRUPTION;
  }
  return err;
}

int ha_tidesdb::recheck_virtual_parts(uchar *buf) {
  if (!table->vfield) return 0;
  const KEY *key = &table->key_info[m_cursor_key];
  bool virtual_parts = false;
  for (uint p = 0; p < key->user_defined_key_parts; p++) {
    const Field *f = key->key_part[p].field;
    if (f->stored_in_db()) continue;
    virtual_parts = true;
    if (buf != table->record[0] || !bitmap_is_set(table->read_set, f->field_index)) return 1;
  }
  if (!virtual_parts) return 0;
  return table->update_virtual_fields(this, VCOL_UPDATE_FOR_READ) ? -1 : 0;
}

int ha_tidesdb::cursor_read(uchar *buf, int st, bool forward, const std::string *prefix,
                            int not_found) {
  for (;;) {
    m_cursor_positioned = st == TDB_OK;
    if (st == TDB_END) return not_found;
    if (st) return fail(st);
    const uint8_t *k, *v;
    size_t klen, vlen;
    if ((st = tdb_cursor_entry(m_cursor, &k, &klen, &v, &vlen))) return fail(st);
    if (prefix && (klen < prefix->size() || memcmp(k, prefix->data(), prefix->size())))
      return not_found;
    int err = fetch_entry_row(buf, k, klen, v, vlen);
    if (m_cursor_index != 0 && (!err || err == ICP_NO_MATCH))
      m_last_entry_key.assign((const char *)k, klen);
    if (err == ICP_OUT_OF_RANGE) return not_found;
    if (err != ROW_GONE) return err;
    st = forward ? tdb_cursor_next(m_cursor) : tdb_cursor_prev(m_cursor);
  }
}

/* As InnoDB's change_active_index: a REPEATABLE READ snapshot older than the
   index's entries (the table rebuilt, or the index added, since) would miss some;
   the read fails with HA_ERR_TABLE_DEF_CHANGED ("please retry transaction"). */
int ha_tidesdb::check_readable(uint engine_idx) {
  int st = tdb_index_readable(trx(), m_tbl, engine_idx);
  return st ? fail(st) : 0;
}

int ha_tidesdb::rnd_init(bool scan) {
  close_cursor();
  m_rnd_started = false;
  if (int err = check_readable(0)) return err;
  return scan ? open_cursor(0) : 0;
}

int ha_tidesdb::rnd_next(uchar *buf) {
  if (!m_cursor) {
    if (int err = open_cursor(0)) return err;
  }
  if (!m_rnd_started) m_cursor_positioned = false;
  int st;
  if (!m_rnd_started)
    st = tdb_cursor_seek(m_cursor, TDB_SEEK_FIRST, nullptr, 0);
  else if (!m_cursor_positioned)
    /* The cursor was closed since the last row (HANDLER ... READ NEXT): continue
       after that row. */
    st = tdb_cursor_seek(m_cursor, TDB_SEEK_GT_PREFIX, (const uint8_t *)m_last_pk.data(),
                         m_last_pk.size());
  else
    st = tdb_cursor_next(m_cursor);
  m_rnd_started = true;
  return cursor_read(buf, st, true, nullptr, HA_ERR_END_OF_FILE);
}

int ha_tidesdb::rnd_end() {
  close_cursor();
  m_rnd_started = false;
  return 0;
}

void ha_tidesdb::position(const uchar *record) {
  std::string pk;
  /* After an index-only read the record lacks the prefix parts of the primary key
     (index merge positions such rows): the key of the entry read is the row's. */
  if (m_hidden_pk ||
      (keyread_enabled() && !m_key_fully_covered[table->s->primary_key]))
    pk = m_last_pk;
  else
    encode_pk(record, &pk);
  memset(ref, 0, ref_length);
  memcpy(ref, pk.data(), std::min<size_t>(pk.size(), ref_length));
}

int ha_tidesdb::rnd_pos(uchar *buf, uchar *pos) {
  int err = read_row_by_pk(buf, pos, ref_length);
  return err == HA_ERR_KEY_NOT_FOUND ? HA_ERR_RECORD_DELETED : err;
}

int ha_tidesdb::index_init(uint idx, bool) {
  if (int err = check_readable(engine_index(idx))) return err;
  active_index = idx;
  m_cursor_key = idx;
  m_spatial_mode = UINT32_MAX;
  /* The cursor opens at the first read that needs one: a whole primary key read
     (index_read_idx_map of const and eq_ref lookups, an equality range) reads the
     row directly, and building an iterator over every memtable and file would be
     most of its cost. */
  if (m_cursor && m_cursor_index != engine_index(idx)) close_cursor();
  return 0;
}

int ha_tidesdb::index_end() {
  close_cursor();
  active_index = MAX_KEY;
  return 0;
}

static uint32_t seek_mode(enum ha_rkey_function flag) {
  switch (flag) {
  case HA_READ_KEY_EXACT:
  case HA_READ_KEY_OR_NEXT:
  case HA_READ_PREFIX:
    return TDB_SEEK_GE;
  case HA_READ_AFTER_KEY:
    return TDB_SEEK_GT_PREFIX;
  case HA_READ_KEY_OR_PREV:
  case HA_READ_PREFIX_LAST:
  case HA_READ_PREFIX_LAST_OR_PREV:
    return TDB_SEEK_LE_PREFIX;
  case HA_READ_BEFORE_KEY:
    return TDB_SEEK_LT;
  default:
    return UINT32_MAX;
  }
}

int ha_tidesdb::index_read_map(uchar *buf, const uchar *key, key_part_map keypart_map,
                               enum ha_rkey_function find_flag) {
  KEY *key_info = &table->key_info[active_index];
  if (is_spatial(key_info)) return spatial_read(buf, key, find_flag);
  m_spatial_mode = UINT32_MAX;
  m_search_key.clear();
  uint n_parts = encode_key_from_image(table, key_info, key, keypart_map, m_scratch_rec,
                                       &m_search_key);
  /* A whole primary key: one point read, no cursor. */
  if (is_pk(active_index) && find_flag == HA_READ_KEY_EXACT &&
      n_parts == key_info->user_defined_key_parts) {
    m_cursor_positioned = false;
    return read_row_by_pk(buf, (const uint8_t *)m_search_key.data(), m_search_key.size());
  }
  uint32_t mode = seek_mode(find_flag);
  if (mode == UINT32_MAX) return HA_ERR_WRONG_COMMAND;
  if (int err = open_cursor(engine_index(active_index))) return err;
  m_cursor_key = active_index;
  int st = tdb_cursor_seek(m_cursor, mode, (const uint8_t *)m_search_key.data(),
                           m_search_key.size());
  bool exact = find_flag == HA_READ_KEY_EXACT || find_flag == HA_READ_PREFIX ||
               find_flag == HA_READ_PREFIX_LAST;
  bool forward = mode == TDB_SEEK_GE || mode == TDB_SEEK_GT_PREFIX;
  return cursor_read(buf, st, forward, exact ? &m_search_key : nullptr, HA_ERR_KEY_NOT_FOUND);
}

int ha_tidesdb::index_read_last_map(uchar *buf, const uchar *key, key_part_map keypart_map) {
  return index_read_map(buf, key, keypart_map, HA_READ_PREFIX_LAST);
}

int ha_tidesdb::index_step(uchar *buf, bool forward) {
  int st;
  if (!m_cursor_positioned) {
    /* After a point read (or a HANDLER statement that closed the cursor): continue
       from the last entry read, the primary key on the rows index, the whole entry
       key on a secondary one. */
    if (m_spatial_mode != UINT32_MAX && forward) return spatial_resume(buf);
    if (!m_cursor) {
      if (int err = open_cursor(engine_index(active_index))) return err;
    }
    const std::string &from = m_cursor_index == 0 ? m_last_pk : m_last_entry_key;
    st = tdb_cursor_seek(m_cursor, forward ? TDB_SEEK_GT_PREFIX : TDB_SEEK_LT,
                         (const uint8_t *)from.data(), from.size());
  } else {
    st = forward ? tdb_cursor_next(m_cursor) : tdb_cursor_prev(m_cursor);
  }
  return cursor_read(buf, st, forward, nullptr, HA_ERR_END_OF_FILE);
}

int ha_tidesdb::index_next(uchar *buf) { return index_step(buf, true); }

int ha_tidesdb::index_prev(uchar *buf) { return index_step(buf, false); }

int ha_tidesdb::index_next_same(uchar *buf, const uchar *key, uint keylen) {
  /* A window search goes on in the engine: the key bytes of its entries are not
     the server's key image, so the default comparison cannot end it. */
  if (m_spatial_mode != UINT32_MAX) return index_step(buf, true);
  return handler::index_next_same(buf, key, keylen);
}

int ha_tidesdb::index_edge(uchar *buf, bool first) {
  if (int err = open_cursor(engine_index(active_index))) return err;
  m_cursor_key = active_index;
  m_spatial_mode = UINT32_MAX;
  int st = tdb_cursor_seek(m_cursor, first ? TDB_SEEK_FIRST : TDB_SEEK_LAST, nullptr, 0);
  return cursor_read(buf, st, first, nullptr, HA_ERR_END_OF_FILE);
}

int ha_tidesdb::index_first(uchar *buf) { return index_edge(buf, true); }

int ha_tidesdb::index_last(uchar *buf) { return index_edge(buf, false); }

/* ------------------------------------------------------- statistics, admin */

/* Up to this estimate, info() counts a table's rows exactly (a short scan). */
static const uint64_t SMALL_TABLE_ROWS = 1000;

ha_rows ha_tidesdb::count_rows_committed(uint64_t fallback, uint64_t committed_seq) {
  std::lock_guard<std::mutex> guard(m_share->count_mutex);
  /* No commit since the count (committed_seq unchanged) and the same estimate: the
     count still holds, so statements on tables nobody writes do not rescan them.
     (The estimate alone is no stamp: a flush can drop as many entries as a write
     added, and the count was then one row short, unstable from run to run.) */
  if (m_share->count_stamp == fallback && m_share->count_seq == committed_seq)
    return m_share->count_rows;
  tdb_trx *t = tdb_trx_new();
  tdb_cursor *c = nullptr;
  ha_rows n = 0;
  bool ok = false;
  /* A secondary index other than FULLTEXT (one entry per word) has one small entry
     per row: cheaper to walk than rows that may carry large BLOBs. */
  uint32_t index = 0;
  for (uint k = 0; k < table->s->keys && !index; k++)
    if (!is_pk(k) && !is_fulltext(&table->key_info[k])) index = engine_index(k);
  if (t && !tdb_trx_begin(t, TDB_ISO_READ_COMMITTED) && !tdb_cursor_open(t, m_tbl, index, &c)) {
    int st = tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0);
    for (; st == TDB_OK && n <= SMALL_TABLE_ROWS * 4; st = tdb_cursor_next(c)) n++;
    ok = st == TDB_END;
  }
  if (c) tdb_cursor_close(c);
  if (t) tdb_trx_free(t);
  if (!ok) return (ha_rows)fallback;
  m_share->count_stamp = fallback;
  m_share->count_seq = committed_seq;
  m_share->count_rows = n;
  return n;
}

/* ## Format (saved statistics, tdb_table_stats_save)
   u32 LE number of keys, then per key: u32 LE number of parts, then one u64 LE
   rec_per_key per part. */
static std::string serialize_rec_per_key(const std::vector<std::vector<ulong>> &rpk) {
  std::string b;
  auto put = [&b](uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) b.push_back((char)((v >> (8 * i)) & 0xFF));
  };
  put(rpk.size(), 4);
  for (const auto &key : rpk) {
    put(key.size(), 4);
    for (ulong v : key) put(v, 8);
  }
  return b;
}

static bool parse_rec_per_key(const uint8_t *p, size_t len,
                              std::vector<std::vector<ulong>> *out) {
  size_t pos = 0;
  auto get = [&](int bytes, uint64_t *v) {
    if (pos + bytes > len) return false;
    *v = 0;
    for (int i = 0; i < bytes; i++) *v |= (uint64_t)p[pos + i] << (8 * i);
    pos += bytes;
    return true;
  };
  uint64_t keys, parts, v;
  if (!get(4, &keys) || keys > MAX_KEY) return false;
  out->assign(keys, {});
  for (uint64_t k = 0; k < keys; k++) {
    if (!get(4, &parts) || parts > MAX_REF_PARTS) return false;
    for (uint64_t i = 0; i < parts; i++) {
      if (!get(8, &v)) return false;
      (*out)[k].push_back((ulong)v);
    }
  }
  return pos == len;
}

int ha_tidesdb::info(uint flag) {
  if (!m_tbl) return 0;
  if (flag & HA_STATUS_VARIABLE) {
    struct tdb_table_stats s;
    if (!tdb_table_stats(m_tbl, &s)) {
      /* As InnoDB: 0 only when asked for time/open info (SHOW TABLE STATUS,
         information_schema); otherwise at least 1, as the optimizer treats 0 and 1
         as exact. */
      stats.records = s.approx_rows;
      /* The engine's estimate counts every version still in the memtables, so on a
         small table a few UPDATEs inflate it by a large factor and change join
         orders (a multi-table UPDATE's result depends on its join order). Small
         tables are counted exactly instead; see SMALL_TABLE_ROWS. */
      if (s.approx_rows <= SMALL_TABLE_ROWS) stats.records = count_rows_committed(s.approx_rows, s.committed_seq);
      if (stats.records == 0 && !(flag & (HA_STATUS_TIME | HA_STATUS_OPEN))) stats.records = 1;
      stats.deleted = 0;
      stats.data_file_length = s.data_bytes;
      stats.index_file_length = s.index_bytes;
      stats.delete_length = s.free_bytes;
      stats.mean_rec_length =
          (ulong)(stats.records ? s.data_bytes / stats.records : 0);
    }
  }
  if (flag & HA_STATUS_CONST) {
    stats.block_size = cost::PAGE_BYTES; /* InnoDB's: handler::keyread_time uses it */
    if (m_share) {
      std::lock_guard<std::mutex> guard(m_share->count_mutex);
      if (!m_share->stats_loaded) {
        /* Statistics saved by an earlier ANALYZE (once per table share). */
        m_share->stats_loaded = true;
        const uint8_t *blob;
        size_t len;
        std::vector<std::vector<ulong>> saved;
        if (!tdb_table_stats_load(m_tbl, &blob, &len) &&
            parse_rec_per_key(blob, len, &saved) && saved.size() == table->s->keys) {
          m_share->rec_per_key = saved;
          /* Saved before extended keys, without the ext parts' values: used, and
             measured again at the next use (tidesdb_stats_auto_recalc). */
          bool complete = true;
          for (uint k = 0; k < table->s->keys; k++) {
            const KEY &key = table->key_info[k];
            if (!saved[k].empty() && saved[k].size() < key.ext_key_parts) complete = false;
          }
          m_share->stats_measured = complete;
          m_share->stats_rows = stats.records;
          m_share->stats_version++;
        }
      }
    }
    /* SHOW INDEX and information_schema.STATISTICS lock no table: a table without
       statistics is measured here for them (statements do it in external_lock). */
    THD *thd = ha_thd();
    if (thd && m_share && !m_share->stats_measured &&
        (thd_sql_command(thd) == SQLCOM_SHOW_KEYS || thd_sql_command(thd) == SQLCOM_SELECT))
      maybe_recalc_statistics(thd);
    apply_statistics();
  }
  if (flag & HA_STATUS_TIME) report_times();
  if (flag & HA_STATUS_ERRKEY) {
    errkey = m_dup_key;
  }
  if ((flag & HA_STATUS_AUTO) && table->found_next_number_field) {
    stats.auto_increment_value = ensure_auto_increment_seeded();
  }
  return 0;
}

enum row_type ha_tidesdb::get_row_type() const {
  switch (table_share ? table_share->row_type : ROW_TYPE_DEFAULT) {
  case ROW_TYPE_REDUNDANT:
  case ROW_TYPE_COMPACT:
  case ROW_TYPE_COMPRESSED:
    return table_share->row_type;
  default:
    return ROW_TYPE_DYNAMIC;
  }
}

/* Create_time: when the table's .frm was written, as InnoDB reports it (ALTER
   TABLE that copies or rebuilds renews it). Update_time: the last row change
   since the server started. */
void ha_tidesdb::report_times() {
  char path[FN_REFLEN];
  MY_STAT st;
  fn_format(path, table_share->normalized_path.str, "", reg_ext, MY_UNPACK_FILENAME);
  if (my_stat(path, &st, MYF(0))) stats.create_time = (ulong)st.st_ctime;
  /* None for a sequence, as InnoDB shows none (its sequence row writes, outside
     any transaction, do not mark the table changed). */
  if (m_share && !is_sequence())
    stats.update_time = (ulong)m_share->update_time.load(std::memory_order_relaxed);
}

/* The optimizer gets the measured rows per value as InnoDB gives it (at least 1;
   on 10.11 halved, see REC_PER_KEY_DIVISOR): the same ref estimates, so the same
   plans. */
void ha_tidesdb::apply_statistics() {
  if (!m_share) return;
  std::lock_guard<std::mutex> guard(m_share->count_mutex);
  m_stats_version = m_share->stats_version;
  const auto &rpk = m_share->rec_per_key;
  for (uint k = 0; k < table->s->keys && k < rpk.size(); k++) {
    KEY *key = &table->key_info[k];
    /* The ext parts' too (KEY::rec_per_key has ext_key_parts entries). */
    uint parts = std::max(key->user_defined_key_parts, key->ext_key_parts);
    for (uint p = 0; p < parts && p < rpk[k].size(); p++)
      key->rec_per_key[p] = rpk[k][p] ? std::max<ulong>(1, rpk[k][p] / tidesdb_compat::REC_PER_KEY_DIVISOR) : 0;
  }
}

/* The smallest key above every key that starts with *key; false if there is none
   (all bytes 0xFF). */
static bool prefix_successor(std::string *key) {
  while (!key->empty()) {
    uchar last = (uchar)key->back();
    key->pop_back();
    if (last != 0xFF) {
      key->push_back((char)(last + 1));
      return true;
    }
  }
  return false;
}

ha_rows ha_tidesdb::records_in_range(uint inx, const key_range *min_key,
                                     const key_range *max_key, page_range *) {
  KEY *key_info = &table->key_info[inx];
  if (is_spatial(key_info)) return spatial_records_in_range(inx, min_key);
  /* As InnoDB's: an index the transaction's snapshot may not read (check_readable)
     looks costlier than a scan of the table, so the plan reads the rows instead. */
  if (tdb_index_readable(trx(), m_tbl, engine_index(inx))) return stats.records * 2 + 10;
  std::string lo, hi;
  /* Engine keys extend the encoded prefix (more parts, the primary key), so an
     inclusive bound on a prefix reaches up to the prefix's successor. */
  bool hi_open = false;
  if (min_key) {
    encode_key_from_image(table, key_info, min_key->key, min_key->keypart_map, m_scratch_rec,
                          &lo);
    if (min_key->flag == HA_READ_AFTER_KEY && !prefix_successor(&lo)) return 1;
  }
  if (max_key) {
    encode_key_from_image(table, key_info, max_key->key, max_key->keypart_map, m_scratch_rec,
                          &hi);
    if (max_key->flag == HA_READ_AFTER_KEY && !prefix_successor(&hi)) hi_open = true;
  }
  if (hi_open) max_key = nullptr;
  uint64_t n = tdb_table_keys_in_range(
      m_tbl, engine_index(inx), min_key ? (const uint8_t *)lo.data() : nullptr, lo.size(),
      max_key ? (const uint8_t *)hi.data() : nullptr, hi.size());
  return n ? (ha_rows)n : 1;
}

/* Costs as InnoDB's: cost_model.h. */
double ha_tidesdb::scan_cost() {
  return cost::scan_time(cost::table_pages(stats.data_file_length));
}

double ha_tidesdb::read_cost(uint index, uint ranges, ha_rows rows) {
  if (index != table->s->primary_key) return cost::secondary_read_time(ranges, (double)rows);
  return cost::primary_read_time(ranges, (double)rows, (double)estimate_rows_upper_bound(),
                                 cost::table_pages(stats.data_file_length));
}

/* Entries of an index a measurement reads at most: ANALYZE TABLE up to
   ANALYZE_SAMPLE, the automatic one (first use, recalculation) up to AUTO_SAMPLE,
   about what InnoDB's 20 sample leaf pages hold. An index with fewer entries is
   read whole (exact); a larger one in runs of consecutive entries starting at
   SAMPLE_RUNS keys spread over its whole range (tdb_table_sample_keys), because
   its first entries are one corner of the key range (a column's values in the
   order they were loaded, a skew in one range). */
static const ha_rows ANALYZE_SAMPLE = 200000;
static const ha_rows AUTO_SAMPLE = 20000;
static const uint32_t SAMPLE_RUNS = 128;

/* ANALYZE TABLE: for every key, the number of distinct values of each key prefix
   among (a sample of) its entries, giving rec_per_key (rows per distinct prefix)
   for the optimizer, as InnoDB's statistics do. */
int ha_tidesdb::analyze(THD *thd, HA_CHECK_OPT *) {
  return measure_statistics(thd, true) ? HA_ADMIN_FAILED : HA_ADMIN_OK;
}

static uint64_t steady_ms() {
  return (uint64_t)std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/* innodb_stats_auto_recalc: a table without statistics (never measured, none
   saved) is measured once it has rows, as InnoDB does when it opens a table
   without persistent statistics; afterwards, when tdb_stats_recalc_due says so
   (a tenth of the rows changed, at most every 10 s as InnoDB's background
   recalculation), the next statement that locks the table (before the optimizer
   uses them) measures them again. Both read at most AUTO_SAMPLE entries per
   index. One handler at a time does it. */
void ha_tidesdb::maybe_recalc_statistics(THD *thd) {
  if (!m_share || !stats_auto_recalc()) return;
  uint64_t changed = m_share->rows_changed.load(std::memory_order_relaxed);
  if (m_share->stats_measured) {
    uint64_t at = m_share->stats_measured_ms.load(std::memory_order_relaxed), now = steady_ms();
    if (!tdb_stats_recalc_due(m_share->stats_rows, changed, now > at ? now - at : 0)) return;
  } else {
    /* Empty when last looked at and unchanged since: still empty. */
    if (changed == m_share->stats_probed.load(std::memory_order_relaxed)) return;
    struct tdb_table_stats s;
    if (tdb_table_stats(m_tbl, &s) || s.approx_rows == 0) {
      m_share->stats_probed = changed;
      return;
    }
  }
  bool idle = false;
  if (!m_share->recalculating.compare_exchange_strong(idle, true)) return;
  count_event(STATS_AUTO_RECALCS);
  if (measure_statistics(thd, false)) {
    /* Not again until the table changes (no warning per statement). */
    m_share->stats_probed = changed;
    sql_print_warning("TidesDB: measuring the statistics of %s failed: %s", m_name.c_str(),
                      m_last_error.c_str());
  }
  m_share->recalculating = false;
}

/* Collects the keys tdb_table_sample_keys passes (called from Rust: nothing may
   unwind through it; a key that does not fit in memory is left out). */
static void collect_key(void *ctx, const uint8_t *key, size_t len) noexcept {
  try {
    ((std::vector<std::string> *)ctx)->emplace_back((const char *)key, len);
  } catch (...) {
  }
}

/* Measures rec_per_key, publishes it and saves it; 0 or a handler error.
   rec_per_key = entries / distinct prefixes. Whole index read: the distinct
   prefixes are counted. Sampled: of the pairs of neighbouring entries read, the
   fraction whose prefixes differ estimates (distinct - 1) / (entries - 1) (in key
   order a new prefix starts at exactly distinct - 1 of the entries - 1 pairs). */
int ha_tidesdb::measure_statistics(THD *thd, bool progress) {
  uint64_t changed_before = m_share->rows_changed.load(std::memory_order_relaxed);
  const ha_rows budget = progress ? ANALYZE_SAMPLE : AUTO_SAMPLE;
  tdb_trx *t = tdb_trx_new();
  if (!t || tdb_trx_begin(t, TDB_ISO_READ_COMMITTED)) {
    if (t) tdb_trx_free(t);
    return HA_ERR_OUT_OF_MEM;
  }
  std::vector<std::vector<ulong>> result(table->s->keys);
  int st = TDB_OK;
  if (progress) thd_progress_init(thd, table->s->keys);
  for (uint k = 0; k < table->s->keys && st == TDB_OK; k++) {
    KEY *key = &table->key_info[k];
    if (is_fulltext(key)) continue; /* no rec_per_key for FULLTEXT keys */
    /* A SPATIAL key has no prefixes to count (the optimizer does not use them). */
    if (is_spatial(key)) continue;
    /* Extended keys: the ext parts' prefixes too (user parts + primary key parts,
       as InnoDB counts its secondary index's columns, primary key ones included). */
    uint parts = std::max(key->user_defined_key_parts, key->ext_key_parts);
    uint32_t index = engine_index(k);
    std::vector<ha_rows> changes(parts, 0); /* neighbour pairs whose prefix differs */
    std::vector<std::string> prev(parts);
    ha_rows entries = 0, pairs = 0;
    tdb_cursor *c = nullptr;
    if ((st = tdb_cursor_open(t, m_tbl, index, &c))) break;
    /* Reads up to limit entries from where the cursor was positioned (at, the
       seek's status); TDB_END when the index ended. */
    auto run = [&](int at, ha_rows limit) {
      ha_rows n_run = 0;
      for (; at == TDB_OK && n_run < limit; at = tdb_cursor_next(c)) {
        const uint8_t *kb, *vb;
        size_t klen, vlen;
        if ((at = tdb_cursor_entry(c, &kb, &klen, &vb, &vlen))) break;
        if (n_run++) pairs++;
        for (uint p = 0; p < parts; p++) {
          size_t n = encoded_prefix_length(table, key, p + 1, kb, klen);
          if (n == 0 || prev[p].size() != n || memcmp(prev[p].data(), kb, n)) {
            if (n_run > 1) changes[p]++;
            prev[p].assign((const char *)kb, n);
          }
        }
      }
      entries += n_run;
      return at;
    };
    /* Within the budget by the engine's entry count: read whole. */
    ha_rows total = tdb_table_keys_in_range(m_tbl, index, nullptr, 0, nullptr, 0);
    bool whole = false;
    if (total <= budget) {
      st = run(tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0), budget);
      whole = st == TDB_END;
      if (!whole && st == TDB_OK) {
        /* The count was low (it is an estimate): sample instead, from scratch. */
        total = entries + 1;
        entries = pairs = 0;
        changes.assign(parts, 0);
      }
    }
    /* Sampled: a first run as long as the others, then one from each of keys
       spread over the whole range. */
    if (!whole && st == TDB_OK) {
      st = run(tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0), budget / SAMPLE_RUNS);
      whole = st == TDB_END;
    }
    if (!whole && st == TDB_OK) {
      std::vector<std::string> starts;
      st = tdb_table_sample_keys(m_tbl, index, SAMPLE_RUNS, collect_key, &starts);
      ha_rows per_run = starts.empty() ? 0 : (budget - entries) / starts.size();
      for (size_t i = 0; i < starts.size() && per_run && st == TDB_OK; i++) {
        st = run(tdb_cursor_seek(c, TDB_SEEK_GE, (const uint8_t *)starts[i].data(),
                                 starts[i].size()),
                 per_run);
        if (st == TDB_END) st = TDB_OK;
      }
      total = std::max<ha_rows>(total, entries + 1);
    }
    tdb_cursor_close(c);
    if (st == TDB_END || st == TDB_OK) st = TDB_OK;
    std::vector<ulong> &rpk = result[k];
    rpk.assign(parts, 0);
    for (uint p = 0; p < parts && entries; p++) {
      double distinct = whole || !pairs
                            ? (double)changes[p] + 1
                            : 1 + (double)changes[p] * (double)(total - 1) / (double)pairs;
      ha_rows rows = whole ? entries : total;
      rpk[p] = (ulong)std::max<double>(1, std::floor((double)rows / distinct));
    }
    /* A unique key without NULLs has one row per value. */
    if ((key->flags & HA_NOSAME) && key->user_defined_key_parts)
      rpk[key->user_defined_key_parts - 1] = 1;
    if (progress) thd_progress_next_stage(thd);
  }
  if (progress) thd_progress_end(thd);
  tdb_trx_free(t);
  if (st != TDB_OK) return fail(st);
  {
    std::lock_guard<std::mutex> guard(m_share->count_mutex);
    m_share->rec_per_key = result;
    m_share->stats_loaded = true;
    m_share->stats_measured = true;
    m_share->stats_measured_ms = steady_ms();
    m_share->stats_version++;
  }
  /* Changes made while measuring count toward the next recalculation (never below
     0 when ANALYZE and a recalculation overlap). */
  uint64_t now = m_share->rows_changed.load(std::memory_order_relaxed);
  while (!m_share->rows_changed.compare_exchange_weak(
      now, now > changed_before ? now - changed_before : 0, std::memory_order_relaxed)) {
  }
  /* Saved with the table, so plans after a restart are those after this ANALYZE,
     as with InnoDB's persistent statistics. */
  std::string blob = serialize_rec_per_key(result);
  if (int sst = tdb_table_stats_save(m_tbl, (const uint8_t *)blob.data(), blob.size(), progress))
    fail(sst);
  info(HA_STATUS_VARIABLE | HA_STATUS_CONST);
  m_share->stats_rows = stats.records;
  return 0;
}

/* CHECK / OPTIMIZE TABLE stopped by an engine error: a damaged table file makes the
   table "Corrupt", anything else (a full disk, ...) "failed"; either way with the
   engine's reason as a warning. */
int ha_tidesdb::admin_failed(THD *thd, int status) {
  std::string why = tdb_last_error();
  int err = fail(status);
  if (status != TDB_CORRUPTION) {
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN,
                        err == HA_ERR_DISK_FULL ? ER_DISK_FULL : ER_GET_ERRNO, "TidesDB: %s",
                        why.c_str());
    return HA_ADMIN_FAILED;
  }
  push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, ER_NOT_KEYFILE, "%s: %s",
                      private_error_text(err), m_last_error.c_str());
  return HA_ADMIN_CORRUPT;
}

/* Whether a stored entry's value is the one key's entry e for row rec has: e's
   own, or the value version 1 form of it (see Format), which entries written by
   older plugins keep until their row is written again. */
bool ha_tidesdb::entry_value_matches(uint key, const uchar *rec, const std::string &pk,
                                     const Index_entry &e, const uint8_t *stored,
                                     size_t stored_len) {
  if (stored_len == e.value.size() && memcmp(stored, e.value.data(), stored_len) == 0) return true;
  if (stored_len < 1 || (stored[0] & ENTRY_VERSION_MASK) != ENTRY_FORMAT_V1) return false;
  Index_entry v1;
  encode_entry(table, &table->key_info[key], m_covered[key], rec, pk, &v1, true);
  return stored_len == v1.value.size() && memcmp(stored, v1.value.data(), stored_len) == 0;
}

/* CHECK TABLE: every row decodes, every index entry a row implies exists, and each
   index holds exactly one entry per row (so there are no orphan entries either). */
int ha_tidesdb::check(THD *thd, HA_CHECK_OPT *) {
  tdb_trx *t = trx();
  uint n_indexes = tdb_table_index_count(m_tbl);
  ha_rows expected = stats.records;
  ha_rows rows = 0;
  std::vector<ha_rows> ft_words(table->s->keys, 0); /* FULLTEXT: postings expected */
  ulonglong problems = 0;
  auto report = [&](const char *what) {
    if (problems++ < 10)
      push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, ER_NOT_KEYFILE,
                          "TidesDB: %s (table %s)", what, m_name.c_str());
  };
  thd_progress_init(thd, 1 + n_indexes);
  tdb_cursor *c = nullptr;
  if (int st = tdb_cursor_open(t, m_tbl, 0, &c)) return fail(st) ? HA_ADMIN_FAILED : 0;
  std::string row;
  External_state check_external; /* holds the external values of the row checked */
  int st = tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0);
  for (; st == TDB_OK; st = tdb_cursor_next(c)) {
    if (thd_killed(thd)) break;
    const uint8_t *k, *v;
    size_t klen, vlen;
    if ((st = tdb_cursor_entry(c, &k, &klen, &v, &vlen))) break;
    rows++;
    if (rows % 1024 == 0) thd_progress_report(thd, rows, expected > rows ? expected : rows);
    row.assign((const char *)v, vlen);
    std::string pk((const char *)k, klen);
    /* Indexed virtual columns are computed by the server, in record[0] only. */
    uchar *rec = table->vfield ? table->record[0] : m_scratch_rec;
    /* Reads every external value too: each must exist with its recorded length. */
    check_external.loaded.assign(table->s->fields, false);
    Engine_external_reader reader(t, m_tbl, table, pk, false, Engine_external_reader::WANT_ALL,
                                  &check_external);
    if (!decode_row(table, m_layout, row, rec, &reader, nullptr, nullptr)) {
      report(reader.status ? reader.error.c_str() : "a row does not decode");
      continue;
    }
    if (table->vfield && (table->update_virtual_fields(this, VCOL_UPDATE_FOR_READ) ||
                          table->update_virtual_fields(this, VCOL_UPDATE_INDEXED))) {
      report("a virtual column cannot be computed");
      continue;
    }
    for (uint key = 0; key < table->s->keys; key++) {
      if (is_pk(key) || ft_check_row(key, rec, &ft_words)) continue;
      Index_entry e;
      encode_secondary(key, rec, pk, &e);
      const uint8_t *ev;
      size_t evlen;
      int gst = tdb_get(t, m_tbl, engine_index(key), (const uint8_t *)e.key.data(), e.key.size(),
                        &ev, &evlen);
      if (gst == TDB_OK && !entry_value_matches(key, rec, pk, e, ev, evlen))
        report("an index entry does not hold its row's values");
      else if (gst == TDB_NOT_FOUND)
        report("a row has no matching entry in an index");
      else if (gst)
        st = gst;
    }
  }
  tdb_cursor_close(c);
  if (st != TDB_OK && st != TDB_END) {
    thd_progress_end(thd);
    return admin_failed(thd, st);
  }
  for (uint idx = 1; idx <= n_indexes && !thd_killed(thd); idx++) {
    thd_progress_next_stage(thd);
    ha_rows entries = 0;
    if ((st = tdb_cursor_open(t, m_tbl, idx, &c))) break;
    for (st = tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0); st == TDB_OK;
         st = tdb_cursor_next(c))
      entries++;
    tdb_cursor_close(c);
    if (st != TDB_END) break;
    st = TDB_OK;
    ha_rows want = rows;
    for (uint k = 0; k < table->s->keys; k++)
      if (!is_pk(k) && engine_index(k) == idx && is_fulltext(&table->key_info[k]))
        want = ft_words[k] + tdb_ft_meta_entries(t, m_tbl, idx);
    if (entries != want) report("an index has a different number of entries than the table has rows");
  }
  thd_progress_end(thd);
  if (thd_killed(thd)) return HA_ADMIN_FAILED;
  if (st != TDB_OK && st != TDB_END) return admin_failed(thd, st);
  return problems ? HA_ADMIN_CORRUPT : HA_ADMIN_OK;
}

/* Rows rewritten per engine transaction by rewrite_old_rows. */
static const size_t REWRITE_BATCH_ROWS = 1000;

/* Each row of an older column definition version is read under its exclusive lock
   (latest committed version) and written again in the current one, in batches
   committed in their own transactions, so concurrent writers wait at most for a
   batch. Only the row's own bytes change: its index entries hold the same values,
   its external values keep their keys (a column keeps its id across versions)
   except those of dropped columns, which are deleted. */
int ha_tidesdb::rewrite_old_rows(THD *thd, ha_rows *rewritten) {
  *rewritten = 0;
  if (!m_layout.versioned()) return TDB_OK;
  std::string last_pk, row, encoded;
  std::vector<std::string> keys;
  bool started = false, at_end = false;
  int st = TDB_OK;
  while (!at_end && !st) {
    tdb_trx *t = tdb_trx_new();
    st = t ? tdb_trx_begin(t, TDB_ISO_READ_COMMITTED) : TDB_INTERNAL;
    keys.clear();
    ha_rows batch = 0;
    tdb_cursor *c = nullptr;
    if (!st) st = tdb_cursor_open(t, m_tbl, 0, &c);
    if (!st)
      st = started ? tdb_cursor_seek(c, TDB_SEEK_GE, (const uint8_t *)last_pk.data(), last_pk.size())
                   : tdb_cursor_seek(c, TDB_SEEK_FIRST, nullptr, 0);
    size_t seen = 0;
    for (; st == TDB_OK && seen < REWRITE_BATCH_ROWS; st = tdb_cursor_next(c)) {
      const uint8_t *k, *v;
      size_t klen, vlen;
      if ((st = tdb_cursor_entry(c, &k, &klen, &v, &vlen))) break;
      std::string key((const char *)k, klen);
      if (started && key == last_pk) continue;
      seen++;
      last_pk = key;
      started = true;
      uint32_t version;
      row.assign((const char *)v, vlen);
      if (row_definition_version(row, &version) && version != m_layout.version())
        keys.push_back(key);
    }
    if (c) tdb_cursor_close(c);
    if (st == TDB_END) {
      at_end = true;
      st = TDB_OK;
    }
    for (size_t i = 0; i < keys.size() && !st; i++) {
      if (thd_killed(thd)) {
        st = TDB_ABORTED;
        break;
      }
      const std::string &pk = keys[i];
      const uint8_t *v;
      size_t vlen;
      st = tdb_lock_row(t, m_tbl, (const uint8_t *)pk.data(), pk.size(), TDB_LOCK_EXCLUSIVE, &v,
                        &vlen);
      if (st == TDB_NOT_FOUND) {
        st = TDB_OK; /* deleted meanwhile */
        continue;
      }
      if (st) break;
      row.assign((const char *)v, vlen);
      uint32_t version;
      if (!row_definition_version(row, &version) || version == m_layout.version()) continue;
      External_state facts;
      if (!decode_row(table, m_layout, row, m_scratch_rec, nullptr, &facts.length,
                      &facts.orphans)) {
        st = TDB_CORRUPTION;
        break;
      }
      /* The external values stay where they are: the encoding keeps them. */
      Row_externals ext;
      ext.keep = facts.length;
      encode_row(table, m_layout, m_scratch_rec, &encoded, &ext);
      std::vector<tdb_op> ops;
      std::deque<std::string> bufs;
      ops.push_back(put_op(0, pk, encoded, 0));
      facts.valid = true;
      orphan_deletes(pk, &facts, &ops, &bufs);
      size_t failed_op = 0;
      st = tdb_apply(t, m_tbl, ops.data(), ops.size(), &failed_op);
      if (!st) batch++;
    }
    if (!st) st = tdb_trx_commit(t);
    if (!st) *rewritten += batch;
    if (t) tdb_trx_free(t);
  }
  return st;
}

/* OPTIMIZE TABLE: rewrites rows of older column definition versions, then
   compacts the rows, then each index, then the external BLOB/TEXT values; the
   progress (SHOW PROCESSLIST) counts column families done. */
int ha_tidesdb::optimize(THD *thd, HA_CHECK_OPT *) {
  uint n = 1 + tdb_table_index_count(m_tbl);
  thd_progress_init(thd, 1);
  close_cursor();
  ha_rows rewritten = 0;
  int st = rewrite_old_rows(thd, &rewritten);
  if (!st && rewritten)
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_NOTE, ER_UNKNOWN_ERROR,
                        "TidesDB: %llu rows rewritten in the table's current column definition "
                        "version",
                        (unsigned long long)rewritten);
  for (uint idx = 0; idx < n && !st; idx++) {
    thd_progress_report(thd, idx, n + 1);
    st = tdb_table_compact_index(m_tbl, idx);
  }
  if (!st) {
    thd_progress_report(thd, n, n + 1);
    st = tdb_table_compact_external(m_tbl);
  }
  thd_progress_end(thd);
  return st ? admin_failed(thd, st) : HA_ADMIN_OK;
}
