/*
  wsrep: Galera replication, the shim's side (see wsrep.h; the decisions are in
  ffi/src/wsrep.rs).

  Certification keys have three parts, as InnoDB's: the database, the table, and
  the engine's key (index name, NUL, encoded key value). The server's own
  table-level keys (TOI, wsrep_thd_append_table_key) have the first two, which is
  how Galera orders DDL against the row changes of the table.
*/
#include "wsrep.h"

#include <mysql/service_wsrep.h>
#include <wsrep_api.h>

#include "ha_tidesdb.h"
#include "errors.h"
#include "foreign_keys.h"

namespace tidesdb {

bool wsrep_certifies(THD *thd, TABLE *table) {
  if (!(wsrep_on(thd))) return false;
  if (table->s->tmp_table != NO_TMP_TABLE) return false;
  if (!wsrep_thd_is_local(thd) || wsrep_thd_ignore_table(thd)) return false;
  /* As InnoDB: CREATE ... SELECT runs in total order isolation (no row keys). */
  return thd_sql_command(thd) != SQLCOM_CREATE_TABLE;
}

namespace {

struct Key_sink {
  THD *thd;
  const char *db;
  const char *table;
};

int append_one(void *ctx, const uint8_t *key, size_t key_len, uint32_t key_type) {
  Key_sink *s = static_cast<Key_sink *>(ctx);
  wsrep_buf_t parts[3] = {{s->db, strlen(s->db)},
                          {s->table, strlen(s->table)},
                          {key, key_len}};
  wsrep_key_t k = {parts, 3};
  return wsrep_thd_append_key(s->thd, &k, 1, (enum Wsrep_service_key_type)key_type);
}

/* A row of a table without primary key as certification sees it: each stored
   column's NULL flag and value text, length-prefixed (the same on every node,
   unlike the hidden row id). */
void row_image(TABLE *table, const uchar *rec, std::string *out) {
  out->clear();
  my_ptrdiff_t d = rec - table->record[0];
  String buf;
  for (Field **fp = table->field; *fp; fp++) {
    Field *f = *fp;
    if (!f->stored_in_db()) continue;
    f->move_field_offset(d);
    bool null = f->is_null();
    out->push_back(null ? 1 : 0);
    if (!null) {
      String *v = f->val_str(&buf, &buf);
      uint32_t len = v ? v->length() : 0;
      out->append((const char *)&len, sizeof len);
      if (v) out->append(v->ptr(), v->length());
    }
    f->move_field_offset(-d);
  }
}

}  // namespace

int wsrep_append_parent_key(THD *thd, const char *parent_path, const char *index_name,
                            const std::string &key) {
  std::string db, tbl;
  fk_split_path(parent_path, &db, &tbl);
  Key_sink sink = {thd, db.c_str(), tbl.c_str()};
  int st = tdb_wsrep_parent_key(index_name, (const uint8_t *)key.data(), key.size(),
                                append_one, &sink);
  return st ? HA_ERR_INTERNAL_ERROR : 0;
}

int wsrep_store_position(THD *thd, tdb_trx *trx) {
  if (!trx || !(wsrep_on(thd))) return 0;
  XID xid;
  thd_get_xid(thd, (MYSQL_XID *)&xid);
  if (!wsrep_is_wsrep_xid(&xid) || wsrep_xid_seqno(&xid) < 0) return 0;
  std::string b = xid_bytes(xid);
  return tdb_trx_write_wsrep_position(trx, (const uint8_t *)b.data(), b.size());
}

/* ---------------------------------------------------------------- handlerton */

static int wsrep_set_checkpoint(handlerton *, const XID *xid) {
  if (!wsrep_is_wsrep_xid(xid)) return 0;
  std::string b = xid_bytes(*xid);
  if (int st = tdb_wsrep_checkpoint_set((const uint8_t *)b.data(), b.size())) {
    sql_print_error("TidesDB: storing the wsrep position failed: %s", tdb_last_error());
    return 1;
  }
  return 0;
}

/* True if a is a position of the same cluster as b and later than it, or b is
   no position at all. */
static bool later_position(const XID *a, const XID *b) {
  if (!wsrep_is_wsrep_xid(b) || wsrep_xid_seqno(b) < 0) return true;
  return memcmp(wsrep_xid_uuid(a), wsrep_xid_uuid(b), 16) == 0 &&
         wsrep_xid_seqno(a) > wsrep_xid_seqno(b);
}

/* The server asks every engine in turn, on one XID, each overwriting it: the
   node's position is the latest of them (replicated commits enter the engines
   in seqno order, so everything before the latest is in). Ours replaces the
   XID only when later; and since InnoDB, asked after us, would put back its
   own (older when the last transactions wrote only TidesDB tables), InnoDB is
   given ours first. */
static int wsrep_get_checkpoint(handlerton *self, XID *xid) {
  uint8_t buf[sizeof(XID) + 16];
  size_t len = 0;
  int st = tdb_wsrep_checkpoint_get(buf, sizeof buf, &len);
  if (st == TDB_NOT_FOUND) return 0;
  XID ours;
  if (st || !xid_from_bytes(buf, len, &ours)) {
    sql_print_error("TidesDB: reading the wsrep position failed: %s", tdb_last_error());
    return 1;
  }
  if (!wsrep_is_wsrep_xid(&ours)) return 0;
  handlerton *innodb = ha_resolve_by_legacy_type(nullptr, DB_TYPE_INNODB);
  if (innodb && innodb != self && innodb->get_checkpoint && innodb->set_checkpoint) {
    XID theirs;
    theirs.null();
    innodb->get_checkpoint(innodb, &theirs);
    if (later_position(&ours, &theirs)) innodb->set_checkpoint(innodb, &ours);
  }
  if (later_position(&ours, xid)) *xid = ours;
  return 0;
}

/* The server's brute-force abort of a local transaction holding a lock an
   applier waits for (as InnoDB's lock_wait_wsrep_kill). */
static int bf_abort(void *bf, void *victim) {
  THD *v = static_cast<THD *>(victim);
  wsrep_thd_kill_LOCK(v);
  wsrep_thd_LOCK(v);
  my_bool aborted = wsrep_thd_bf_abort(static_cast<THD *>(bf), v, 1);
  wsrep_thd_UNLOCK(v);
  wsrep_thd_kill_UNLOCK(v);
  return aborted ? 1 : 0;
}

void wsrep_note_statement(THD *thd, tdb_trx *trx) {
  if (trx && wsrep_on(thd)) tdb_trx_set_wsrep(trx, thd, wsrep_thd_is_BF(thd, false) ? 1 : 0);
}

ulonglong wsrep_refuse_two_engines(THD *thd, ulonglong *trx_id);

/* Our handlerton, for wsrep_refuse_two_engines (which the server calls without it). */
static handlerton *wsrep_self = nullptr;

void wsrep_init_handlerton(handlerton *hton) {
  wsrep_self = hton;
  if (int st = tdb_wsrep_enable(bf_abort))
    sql_print_error("TidesDB: brute-force abort not installed: %s (status %d)", tdb_last_error(), st);
  hton->flags |= HTON_WSREP_REPLICATION;
  hton->set_checkpoint = wsrep_set_checkpoint;
  hton->get_checkpoint = wsrep_get_checkpoint;
  hton->prepare_commit_versioned = wsrep_refuse_two_engines;
}

}  // namespace tidesdb

using namespace tidesdb;

/* True if the transaction (or the statement) has written an engine other than
   ours that replicates by the server's wsrep hooks (InnoDB). The server certifies
   a transaction once per such engine (prepare_or_error in sql/handler.cc calls
   wsrep_before_prepare before each one's prepare), and Galera aborts the node on
   the second certification. Asked at each TidesDB write (InnoDB written first) and
   at the commit (wsrep_refuse_two_engines: TidesDB written first). */
static bool other_replicating_engine_written(THD *thd, handlerton *self) {
  for (THD_TRANS *t : {&thd->transaction->stmt, &thd->transaction->all})
    for (Ha_trx_info *hi = t->ha_list; hi; hi = hi->next())
      if (hi->ht() != self && (hi->ht()->flags & HTON_WSREP_REPLICATION) &&
          hi->is_trx_read_write())
        return true;
  return false;
}

/* True if `hton` has written in the transaction being committed (the server
   prepares only the engines that have). */
static bool written_by(THD *thd, handlerton *hton) {
  for (THD_TRANS *t : {&thd->transaction->stmt, &thd->transaction->all})
    for (Ha_trx_info *hi = t->ha_list; hi; hi = hi->next())
      if (hi->ht() == hton && hi->is_trx_read_write()) return true;
  return false;
}

/* handlerton::prepare_commit_versioned: ha_commit_trans asks every engine of a
   read-write transaction for a system-versioning commit id before any engine
   prepares, so before the server's first wsrep certification. TidesDB keeps no
   such id (0). A local Galera transaction that wrote TidesDB and then InnoDB
   (the order wsrep_row_keys cannot see) would be certified twice, which aborts
   the node: it is refused here instead (ULONGLONG_MAX: the server reports
   ER_ERROR_DURING_COMMIT and rolls the transaction back in both engines). */
ulonglong tidesdb::wsrep_refuse_two_engines(THD *thd, ulonglong *) {
  if (!(wsrep_on(thd)) || !wsrep_thd_is_local(thd)) return 0;
  if (!written_by(thd, wsrep_self) || !other_replicating_engine_written(thd, wsrep_self)) return 0;
  my_printf_error(ER_ERROR_DURING_COMMIT, "%s", MYF(0),
                  "TidesDB: a Galera transaction cannot write both TidesDB and InnoDB tables "
                  "(the server would certify it twice, which aborts the node); it is rolled "
                  "back: write each engine's tables in transactions of their own");
  return ULONGLONG_MAX;
}

int ha_tidesdb::wsrep_row_keys(uint32_t change, const std::vector<tdb_op> &ops,
                               const std::vector<uint> &op_keys, const uchar *old_rec,
                               const uchar *new_rec) {
  THD *thd = ha_thd();
  if (!wsrep_certifies(thd, table)) return 0;
  if (other_replicating_engine_written(thd, ht)) {
    m_last_error.clear();
    return HA_ERR_TIDESDB_WSREP_TWO_ENGINES;
  }
  std::vector<tdb_wsrep_entry> entries;
  entries.reserve(ops.size());
  for (size_t i = 0; i < ops.size(); i++) {
    const tdb_op &op = ops[i];
    tdb_wsrep_entry e;
    e.key = op.key;
    e.key_len = op.key_len;
    e.cls = TDB_WSREP_OTHER;
    e.index_name = "";
    uint k = i < op_keys.size() ? op_keys[i] : MAX_KEY;
    if (op.index == 0 && !m_hidden_pk) {
      e.cls = TDB_WSREP_PRIMARY;
      e.index_name = table->key_info[table->s->primary_key].name.str;
    } else if (op.index != 0 && op.index != TDB_BLOB_INDEX && k < table->s->keys &&
               !is_pk(k) && engine_index(k) == op.index &&
               (table->key_info[k].flags & HA_NOSAME)) {
      e.cls = TDB_WSREP_UNIQUE;
      e.index_name = table->key_info[k].name.str;
    }
    if (e.cls != TDB_WSREP_OTHER) entries.push_back(e);
  }
  std::string old_img, new_img;
  if (m_hidden_pk) {
    if (old_rec) row_image(table, old_rec, &old_img);
    if (new_rec) row_image(table, new_rec, &new_img);
  }
  Key_sink sink = {thd, table->s->db.str, table->s->table_name.str};
  int st = tdb_wsrep_row_keys(
      change, entries.data(), entries.size(),
      m_hidden_pk && old_rec ? (const uint8_t *)old_img.data() : nullptr, old_img.size(),
      m_hidden_pk && new_rec ? (const uint8_t *)new_img.data() : nullptr, new_img.size(),
      append_one, &sink);
  if (st) {
    sql_print_warning("TidesDB: appending wsrep keys failed: %s", tdb_last_error());
    return HA_ERR_INTERNAL_ERROR;
  }
  return 0;
}
