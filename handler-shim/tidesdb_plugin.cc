/*
  tidesdb_plugin: the plugin declaration, the handlerton (engine-wide hooks:
  transactions, savepoints, DROP DATABASE, SHOW ENGINE STATUS), the system
  variables and the table options tied to them (table_options.h). Per-table work
  is in ha_tidesdb.cc, status variables in status.cc.

  Transactions (handler-api-map.md §1.4): each connection has one engine
  transaction (tdb_trx), stored with thd_set_ha_data. Every statement that uses a
  TidesDB table registers the engine for the statement and, inside BEGIN or with
  autocommit off, for the transaction; the server then calls commit/rollback with
  all=false at each statement end and all=true at COMMIT/ROLLBACK.
*/
#include "ha_tidesdb.h"
#include "errors.h"
#include "status.h"
#include "table_options.h"
#include "backup.h"
#include "wsrep.h"
#include <thread>

using namespace tidesdb;

static handlerton *tidesdb_hton = nullptr;

/* The engine's folder inside the datadir; not a database (hidden from SHOW DATABASES
   through @@ignore_db_dirs, as MyRocks does with its own). */
static const char ENGINE_DIR_NAME[] = "#tidesdb";
/* Exported by mariadbd (sql_show.cc) but not declared in a header plugins include. */
void ignore_db_dirs_append(const char *dirname_arg);

/* ---------------------------------------------------------- system variables */

/* INTERVAL is an SQL reserved word (SET GLOBAL tidesdb_sync_mode = INTERVAL is a syntax
   error; only the quoted 'INTERVAL' works): PERIODIC names the same mode and can be
   typed bare. Every value of an ENUM variable must have such a spelling (test
   sysvars_bare_words). */
static const char *sync_mode_names[] = {"NONE", "INTERVAL", "FULL", "PERIODIC", NullS};
enum { SYNC_MODE_PERIODIC = 3 };
static uint32_t engine_sync_mode(ulong value) {
  return value == SYNC_MODE_PERIODIC ? TDB_SYNC_INTERVAL : (uint32_t)value;
}
static TYPELIB sync_mode_typelib = {array_elements(sync_mode_names) - 1, "sync_mode_typelib",
                                    sync_mode_names, NULL};
static ulong sysvar_sync_mode = TDB_SYNC_FULL;
static uint sysvar_sync_interval_ms = 1000;
static ulonglong sysvar_write_buffer_size = 64ULL << 20;
static ulonglong sysvar_block_cache_size = 256ULL << 20;
static uint sysvar_background_threads = 2;
static my_bool sysvar_use_direct_reads = FALSE;
static my_bool sysvar_stats_auto_recalc = TRUE;

static void update_sync_mode(THD *, struct st_mysql_sys_var *, void *var_ptr,
                             const void *save) {
  *(ulong *)var_ptr = *(const ulong *)save;
  tdb_engine_set_sync_mode(engine_sync_mode(sysvar_sync_mode), sysvar_sync_interval_ms);
}

static void update_sync_interval(THD *, struct st_mysql_sys_var *, void *var_ptr,
                                 const void *save) {
  *(uint *)var_ptr = *(const uint *)save;
  tdb_engine_set_sync_mode(engine_sync_mode(sysvar_sync_mode), sysvar_sync_interval_ms);
}

static MYSQL_SYSVAR_ENUM(sync_mode, sysvar_sync_mode, PLUGIN_VAR_RQCMDARG,
                         "When a commit reaches the disk: NONE (left to the OS), PERIODIC "
                         "(a background sync every tidesdb_sync_interval_ms, like "
                         "innodb_flush_log_at_trx_commit=2; 'INTERVAL' is the same mode) or "
                         "FULL (every commit is durable when it returns; concurrent commits "
                         "share one fsync)",
                         NULL, update_sync_mode, TDB_SYNC_FULL, &sync_mode_typelib);
static MYSQL_SYSVAR_UINT(sync_interval_ms, sysvar_sync_interval_ms, PLUGIN_VAR_RQCMDARG,
                         "Milliseconds between background syncs in PERIODIC (INTERVAL) sync mode", NULL,
                         update_sync_interval, 1000, 1, 60000, 0);
static MYSQL_SYSVAR_ULONGLONG(write_buffer_size, sysvar_write_buffer_size,
                              PLUGIN_VAR_RQCMDARG | PLUGIN_VAR_READONLY,
                              "Bytes of memtable per column family before it is flushed to a "
                              "sorted table file",
                              NULL, NULL, 64ULL << 20, 1ULL << 20, 1ULL << 40, 0);
static void update_block_cache_size(THD *, struct st_mysql_sys_var *, void *var_ptr,
                                    const void *save) {
  *(ulonglong *)var_ptr = *(const ulonglong *)save;
  tdb_engine_set_block_cache_size(sysvar_block_cache_size);
}

static MYSQL_SYSVAR_ULONGLONG(block_cache_size, sysvar_block_cache_size, PLUGIN_VAR_RQCMDARG,
                              "Bytes of the cache of table file blocks (a smaller size evicts "
                              "at once)",
                              NULL, update_block_cache_size, 256ULL << 20, 1ULL << 20,
                              1ULL << 50, 0);
static MYSQL_SYSVAR_UINT(background_threads, sysvar_background_threads,
                         PLUGIN_VAR_RQCMDARG | PLUGIN_VAR_READONLY,
                         "Threads that compact table files (memtable flushes have a thread of "
                         "their own)",
                         NULL, NULL, 2, 1, 64, 0);
static MYSQL_SYSVAR_BOOL(use_direct_reads, sysvar_use_direct_reads,
                         PLUGIN_VAR_RQCMDARG | PLUGIN_VAR_READONLY,
                         "Read table files and the value log with O_DIRECT, bypassing the "
                         "operating system's page cache (the block cache still caches), like "
                         "innodb_flush_method=O_DIRECT or rocksdb_use_direct_reads",
                         NULL, NULL, FALSE);

/* Defaults of new tables, each also a table option (see table_options.h). Session
   variables, as the server's table option machinery requires. */
static const char *compression_names[] = {"NONE", "ZSTD", NullS};
static TYPELIB compression_typelib = {array_elements(compression_names) - 1,
                                      "compression_typelib", compression_names, NULL};
static MYSQL_THDVAR_ENUM(compression, PLUGIN_VAR_RQCMDARG,
                         "Compression of the table files of new tables (table option "
                         "COMPRESSION): NONE or ZSTD",
                         NULL, NULL, TDB_COMPRESSION_ZSTD, &compression_typelib);
static MYSQL_THDVAR_UINT(compression_level, PLUGIN_VAR_RQCMDARG,
                         "zstd level of new ZSTD tables (table option COMPRESSION_LEVEL): "
                         "higher compresses more and writes slower",
                         NULL, NULL, 3, 1, 22, 0);
static MYSQL_THDVAR_UINT(bloom_bits_per_key, PLUGIN_VAR_RQCMDARG,
                         "Bloom filter bits per key of the table files of new tables (table "
                         "option BLOOM_BITS); 10 gives about 1% false positives, 0 disables "
                         "the filters",
                         NULL, NULL, 10, 0, 64, 0);
static MYSQL_THDVAR_UINT(block_size, PLUGIN_VAR_RQCMDARG,
                         "Bytes of a table file data block (before compression) of new tables "
                         "(table option BLOCK_SIZE): the unit of reads and of the block cache",
                         NULL, NULL, 4096, 512, 1 << 20, 0);
static MYSQL_THDVAR_ULONGLONG(value_separation_threshold, PLUGIN_VAR_RQCMDARG,
                              "Values (rows) of at least this many bytes of new tables are "
                              "kept in the value log instead of the table files (table option "
                              "VALUE_THRESHOLD); 0 never separates",
                              NULL, NULL, 4096, 0, 1ULL << 32, 0);

static MYSQL_SYSVAR_BOOL(stats_auto_recalc, sysvar_stats_auto_recalc, PLUGIN_VAR_OPCMDARG,
                         "Measure the index statistics of an analyzed table again (as ANALYZE "
                         "TABLE does) once more than 10% of its rows changed, like "
                         "innodb_stats_auto_recalc",
                         NULL, NULL, TRUE);

bool tidesdb::stats_auto_recalc() { return sysvar_stats_auto_recalc; }

static MYSQL_THDVAR_ULONG(lock_wait_timeout, PLUGIN_VAR_RQCMDARG,
                          "Seconds a transaction waits for a row lock before giving up "
                          "with ER_LOCK_WAIT_TIMEOUT (like innodb_lock_wait_timeout)",
                          NULL, NULL, 50, 0, 1024 * 1024 * 1024, 0);

static MYSQL_THDVAR_ULONGLONG(online_alter_max_rows_per_second, PLUGIN_VAR_RQCMDARG,
                              "Rows per second an online ALTER (LOCK=NONE) that rebuilds a "
                              "table or adds an index reads at most, to leave I/O and CPU to "
                              "the workload it runs beside; 0 (default) does not limit it",
                              NULL, NULL, 0, 0, ~0ULL, 0);

Build_pacer::Build_pacer(THD *thd)
    : m_thd(thd), m_rows_per_second(THDVAR(thd, online_alter_max_rows_per_second)),
      m_start(std::chrono::steady_clock::now()) {}

bool Build_pacer::pace(ha_rows rows_done) {
  if (!m_rows_per_second) return !thd_killed(m_thd);
  for (;;) {
    if (thd_killed(m_thd)) return false;
    uint64_t elapsed_us = (uint64_t)std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - m_start)
                              .count();
    uint64_t wait_us = tdb_build_pace_us(rows_done, elapsed_us, m_rows_per_second);
    if (!wait_us) return true;
    /* In slices, so that KILL stops the wait at once. */
    std::this_thread::sleep_for(std::chrono::microseconds(std::min<uint64_t>(wait_us, 100000)));
  }
}

static ulonglong sysvar_lock_escalation_threshold = 100000;
static void update_lock_escalation_threshold(THD *, struct st_mysql_sys_var *, void *var_ptr,
                                             const void *save) {
  *(ulonglong *)var_ptr = *(const ulonglong *)save;
  tdb_engine_set_lock_escalation_threshold(sysvar_lock_escalation_threshold);
}
static MYSQL_SYSVAR_ULONGLONG(lock_escalation_threshold, sysvar_lock_escalation_threshold,
                              PLUGIN_VAR_RQCMDARG,
                              "Row locks one transaction may hold in one table (or index) "
                              "before they are replaced by one table lock of the strongest "
                              "mode held (bounded lock memory; other writers of that table "
                              "then wait); 0 never escalates. InnoDB has no such limit",
                              NULL, update_lock_escalation_threshold, 100000, 0, ~0ULL, 0);

/* Like innodb_force_recovery: start on a damaged engine directory, read-only, so
   that mariadb-dump can save the intact tables (README, "Forcing recovery"). The
   levels are the engine's (tdb_engine_open checks the range too). */
static uint sysvar_force_recovery;
static MYSQL_SYSVAR_UINT(force_recovery, sysvar_force_recovery,
                         PLUGIN_VAR_RQCMDARG | PLUGIN_VAR_READONLY,
                         "0 = off. 1..3 start on a damaged engine directory read-only, skipping "
                         "what cannot be read: 1 damaged table files, value logs, catalog entries "
                         "and prepared-transaction files; 2 also a damaged write-ahead log (replay "
                         "stops at the damage); 3 also a damaged manifest (read up to the damage) "
                         "or CURRENT file",
                         NULL, NULL, 0, 0, 3, 0);

/* Encryption at rest with the server's key management plugin (README, "Encryption
   at rest"), as innodb_encrypt_tables / innodb_encrypt_log. */
static const char *encrypt_tables_names[] = {"OFF", "ON", "FORCE", NullS};
static TYPELIB encrypt_tables_typelib = {array_elements(encrypt_tables_names) - 1, "",
                                         encrypt_tables_names, NULL};
ulong tidesdb_encrypt_tables;
static MYSQL_SYSVAR_ENUM(encrypt_tables, tidesdb_encrypt_tables, PLUGIN_VAR_RQCMDARG,
                         "Encrypt new tables: OFF (only ENCRYPTED=YES ones), ON (all but "
                         "ENCRYPTED=NO ones), FORCE (all; ENCRYPTED=NO is refused). The keys "
                         "come from the key management plugin (ENCRYPTION_KEY_ID, default 1)",
                         NULL, NULL, TIDESDB_ENCRYPT_OFF, &encrypt_tables_typelib);
static my_bool sysvar_encrypt_log;
static MYSQL_SYSVAR_BOOL(encrypt_log, sysvar_encrypt_log,
                         PLUGIN_VAR_OPCMDARG | PLUGIN_VAR_READONLY,
                         "Encrypt the write-ahead log (segments written from the start on) with "
                         "key 1 of the key management plugin",
                         NULL, NULL, FALSE);

static uint32_t server_key_latest_version(uint32_t key_id) {
  return encryption_key_get_latest_version(key_id);
}
static uint32_t server_key_get(uint32_t key_id, uint32_t version, unsigned char *buf,
                               uint32_t *len) {
  unsigned int n = *len;
  unsigned int rc = encryption_key_get(key_id, version, buf, &n);
  *len = n;
  return rc;
}

static uint sysvar_ft_min_token_size;
static MYSQL_SYSVAR_UINT(ft_min_token_size, sysvar_ft_min_token_size,
                         PLUGIN_VAR_RQCMDARG | PLUGIN_VAR_READONLY,
                         "Shortest word (in characters) stored in FULLTEXT indexes (like "
                         "innodb_ft_min_token_size; existing indexes need a rebuild after a "
                         "change)",
                         NULL, NULL, 3, 1, 84, 0);

/* ---- FULLTEXT settings (used by fulltext.cc; an index keeps those it was built
   with, as InnoDB's) ---- */
static uint sysvar_ft_max_token_size;
static MYSQL_SYSVAR_UINT(ft_max_token_size, sysvar_ft_max_token_size,
                         PLUGIN_VAR_RQCMDARG | PLUGIN_VAR_READONLY,
                         "Longest word (in characters) stored in FULLTEXT indexes (like "
                         "innodb_ft_max_token_size)",
                         NULL, NULL, 84, 10, 84, 0);
static MYSQL_THDVAR_BOOL(ft_enable_stopword, PLUGIN_VAR_OPCMDARG,
                         "FULLTEXT indexes built by this session leave out stopwords (like "
                         "innodb_ft_enable_stopword)",
                         NULL, NULL, TRUE);
bool tidesdb::ft_enable_stopword(THD *thd) { return THDVAR(thd, ft_enable_stopword); }
static const char *ft_ranking_names[] = {"INNODB", "BM25", NullS};
static TYPELIB ft_ranking_typelib = {array_elements(ft_ranking_names) - 1, "ft_ranking_typelib",
                                     ft_ranking_names, NULL};
static MYSQL_THDVAR_ENUM(ft_ranking, PLUGIN_VAR_RQCMDARG,
                         "Relevance of MATCH ... AGAINST on TidesDB tables: INNODB (InnoDB's "
                         "values and order) or BM25 (Okapi BM25, with document length "
                         "normalisation for indexes built by this version)",
                         NULL, NULL, 0, &ft_ranking_typelib);
bool tidesdb::ft_ranking_bm25(THD *thd) { return THDVAR(thd, ft_ranking) == 1; }
static char *sysvar_ft_server_stopword_table;
static MYSQL_SYSVAR_STR(ft_server_stopword_table, sysvar_ft_server_stopword_table,
                        PLUGIN_VAR_OPCMDARG | PLUGIN_VAR_MEMALLOC,
                        "The stopword list of FULLTEXT indexes built from now on: 'db/table' "
                        "of a table whose first column is a VARCHAR `value` (like "
                        "innodb_ft_server_stopword_table)",
                        tidesdb::ft_stopword_table_check, NULL, NULL);
static MYSQL_THDVAR_STR(ft_user_stopword_table, PLUGIN_VAR_OPCMDARG | PLUGIN_VAR_MEMALLOC,
                        "The stopword list of FULLTEXT indexes this session builds, over "
                        "tidesdb_ft_server_stopword_table (like innodb_ft_user_stopword_table)",
                        tidesdb::ft_stopword_table_check, NULL, NULL);
static char *sysvar_ft_aux_table;
static MYSQL_SYSVAR_STR(ft_aux_table, sysvar_ft_aux_table, PLUGIN_VAR_OPCMDARG | PLUGIN_VAR_MEMALLOC,
                        "'db/table' of a TidesDB table whose FULLTEXT indexes' words "
                        "INFORMATION_SCHEMA.TIDESDB_FT_INDEX_TABLE lists (like "
                        "innodb_ft_aux_table)",
                        tidesdb::ft_aux_table_check, NULL, NULL);
std::string tidesdb::ft_aux_table() {
  mysql_mutex_lock(&LOCK_global_system_variables);
  std::string name = sysvar_ft_aux_table ? sysvar_ft_aux_table : "";
  mysql_mutex_unlock(&LOCK_global_system_variables);
  return name;
}
const char *tidesdb::ft_server_stopword_table() { return sysvar_ft_server_stopword_table; }
const char *tidesdb::ft_user_stopword_table(THD *thd) {
  return THDVAR(thd, ft_user_stopword_table);
}
/* ---- end of FULLTEXT settings ---- */

static struct st_mysql_sys_var *tidesdb_system_variables[] = {
    MYSQL_SYSVAR(ft_aux_table),
    MYSQL_SYSVAR(ft_min_token_size),
    MYSQL_SYSVAR(ft_max_token_size),
    MYSQL_SYSVAR(ft_enable_stopword),
    MYSQL_SYSVAR(ft_ranking),
    MYSQL_SYSVAR(ft_server_stopword_table),
    MYSQL_SYSVAR(ft_user_stopword_table),
    MYSQL_SYSVAR(force_recovery),
    MYSQL_SYSVAR(encrypt_tables),
    MYSQL_SYSVAR(encrypt_log),
    MYSQL_SYSVAR(lock_wait_timeout),
    MYSQL_SYSVAR(lock_escalation_threshold),
    MYSQL_SYSVAR(online_alter_max_rows_per_second),
    MYSQL_SYSVAR(sync_mode),
    MYSQL_SYSVAR(sync_interval_ms),
    MYSQL_SYSVAR(write_buffer_size),
    MYSQL_SYSVAR(block_cache_size),
    MYSQL_SYSVAR(background_threads),
    MYSQL_SYSVAR(use_direct_reads),
    MYSQL_SYSVAR(compression),
    MYSQL_SYSVAR(compression_level),
    MYSQL_SYSVAR(bloom_bits_per_key),
    MYSQL_SYSVAR(block_size),
    MYSQL_SYSVAR(value_separation_threshold),
    MYSQL_SYSVAR(stats_auto_recalc),
    tidesdb::checkpoint_sysvar(),
    tidesdb::backup_checkpoint_sysvar(),
    NULL};

namespace tidesdb {
ha_create_table_option table_option_list[] = {
    HA_TOPTION_SYSVAR("COMPRESSION", compression, compression),
    HA_TOPTION_SYSVAR("COMPRESSION_LEVEL", compression_level, compression_level),
    HA_TOPTION_SYSVAR("BLOOM_BITS", bloom_bits, bloom_bits_per_key),
    HA_TOPTION_SYSVAR("BLOCK_SIZE", block_size, block_size),
    HA_TOPTION_SYSVAR("VALUE_THRESHOLD", value_threshold, value_separation_threshold),
    HA_TOPTION_ENUM("ENCRYPTED", encrypted, "DEFAULT,YES,NO", 0),
    HA_TOPTION_NUMBER("ENCRYPTION_KEY_ID", encryption_key_id, 1, 1, 0xFFFFFFFFULL, 1),
    HA_TOPTION_END};
}  // namespace tidesdb

/* ------------------------------------------------------------ transactions */

namespace tidesdb {

tdb_trx *get_trx(THD *thd, bool create) {
  tdb_trx *trx = static_cast<tdb_trx *>(thd_get_ha_data(thd, tidesdb_hton));
  if (!trx && create) {
    trx = tdb_trx_new();
    thd_set_ha_data(thd, tidesdb_hton, trx);
  }
  return trx;
}

static uint32_t isolation_of(THD *thd) {
  switch (thd_tx_isolation(thd)) {
  case ISO_READ_UNCOMMITTED: return TDB_ISO_READ_UNCOMMITTED;
  case ISO_READ_COMMITTED: return TDB_ISO_READ_COMMITTED;
  case ISO_SERIALIZABLE: return TDB_ISO_SERIALIZABLE;
  default: return TDB_ISO_REPEATABLE_READ;
  }
}

static bool in_multi_statement_trx(THD *thd) {
  return thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN);
}

uint64_t statement_lock_wait_ms(THD *thd) {
  uint64_t ms = (uint64_t)THDVAR(thd, lock_wait_timeout) * 1000;
  /* NOWAIT and WAIT n are statement variables (lock_wait_timeout, and
     innodb_lock_wait_timeout when InnoDB is loaded); a plain session
     lock_wait_timeout (for metadata locks) does not shorten row lock waits. */
  if (thd->lex && !thd->lex->stmt_var_list.is_empty())
    ms = std::min<uint64_t>(ms, (uint64_t)thd->variables.lock_wait_timeout * 1000);
  return ms;
}

int begin_statement(THD *thd, tdb_trx **out) {
  tdb_trx *trx = get_trx(thd, true);
  *out = trx;
  if (!trx) return TDB_INTERNAL;
  if (int st = tdb_trx_begin(trx, isolation_of(thd))) return st;
  if (int st = tdb_trx_stmt_begin(trx)) return st;
  tdb_trx_set_lock_wait_timeout(trx, statement_lock_wait_ms(thd));
  wsrep_note_statement(thd, trx);
  trans_register_ha(thd, false, tidesdb_hton, 0);
  if (in_multi_statement_trx(thd)) trans_register_ha(thd, true, tidesdb_hton, 0);
  return TDB_OK;
}

}  // namespace tidesdb

/* The real end of a transaction is COMMIT (all) or the end of a statement in
   autocommit mode; otherwise a statement ends inside the transaction. */
static bool ends_transaction(THD *thd, bool all) {
  return all || !thd_test_options(thd, OPTION_NOT_AUTOCOMMIT | OPTION_BEGIN);
}

/* A commit or prepare that failed for lack of space (ENOSPC / EDQUOT while writing
   the engine's log): raised as ER_DISK_FULL, naming the directory to free space in,
   before the server's generic ER_ERROR_DURING_COMMIT (the first error is the one
   the client gets). Nothing of the transaction was written; space freed, the next
   commit works (no restart). */
static void raise_disk_full() {
  my_printf_error(ER_DISK_FULL, "Disk got full writing '%s' (Errcode: %M)", MYF(0),
                  ENGINE_DIR_NAME, ENOSPC);
}

static int tidesdb_commit(THD *thd, bool all) {
  tdb_trx *trx = get_trx(thd, false);
  if (!trx) return 0;
  int st = 0;
  if (ends_transaction(thd, all)) {
    /* A replicated commit's cluster position goes into its own write batch (a
       prepared transaction got it at prepare). */
    st = wsrep_store_position(thd, trx);
    if (!st) st = tdb_trx_commit(trx);
  } else {
    st = tdb_trx_stmt_commit(trx);
  }
  if (st) {
    sql_print_warning("TidesDB: commit failed: %s", tdb_last_error());
    int err = to_ha_error(st, thd);
    /* The server reports a failed commit as ER_ERROR_DURING_COMMIT, which clients
       do not retry. A conflict or deadlock is raised as ER_LOCK_DEADLOCK first: the
       statement's first error is the one the client gets. */
    if (err == HA_ERR_LOCK_DEADLOCK) my_error(ER_LOCK_DEADLOCK, MYF(0));
    if (err == HA_ERR_DISK_FULL) raise_disk_full();
    return err;
  }
  return 0;
}

/* Called (serialised by the server) in the commit order of every engine and the
   binlog, before commit(): the commit becomes visible here, so a consistent snapshot
   (taken under the same lock) is one commit point across engines. It may run in
   another session's thread: no my_error here; the outcome is kept in the engine
   transaction and tidesdb_commit returns it. */
static void tidesdb_commit_ordered(THD *thd, bool all) {
  tdb_trx *trx = get_trx(thd, false);
  if (trx && ends_transaction(thd, all)) tdb_trx_commit_ordered(trx);
}

/* The transaction coordinator (binlog, tc log) keeps what it needs to commit the
   prepared transactions again at recovery until the engine says the commits so far
   are durable (commit_ordered does not wait for their fsync). */
static void tidesdb_commit_checkpoint_request(void *cookie) {
  if (int st = tdb_sync_wal()) {
    /* Not notified: the coordinator keeps its recovery information; the next
       request tries again. */
    sql_print_warning("TidesDB: syncing the log for a commit checkpoint failed: %s (status %d)",
                      tdb_last_error(), st);
    return;
  }
  commit_checkpoint_notify_ha(cookie);
}

static int tidesdb_rollback(THD *thd, bool all) {
  tdb_trx *trx = get_trx(thd, false);
  if (!trx) return 0;
  int st = ends_transaction(thd, all) ? tdb_trx_rollback(trx) : tdb_trx_stmt_rollback(trx);
  return st ? to_ha_error(st, thd) : 0;
}

/* ---------------------------------------------------------------- XA / 2PC */

/* An XID as the engine stores it: formatID (8 bytes LE), gtrid and bqual lengths
   (1 byte each), then gtrid and bqual. */
std::string xid_bytes(const XID &xid) {
  std::string b;
  ulonglong format = (ulonglong)xid.formatID;
  for (int i = 0; i < 8; i++) b.push_back((char)((format >> (8 * i)) & 0xFF));
  b.push_back((char)xid.gtrid_length);
  b.push_back((char)xid.bqual_length);
  b.append(xid.data, (size_t)(xid.gtrid_length + xid.bqual_length));
  return b;
}

bool xid_from_bytes(const uint8_t *p, size_t len, XID *xid) {
  if (len < 10) return false;
  ulonglong format = 0;
  for (int i = 0; i < 8; i++) format |= (ulonglong)p[i] << (8 * i);
  long gtrid = p[8], bqual = p[9];
  if (gtrid > MAXGTRIDSIZE || bqual > MAXBQUALSIZE || len != (size_t)(10 + gtrid + bqual))
    return false;
  xid->set((long)format, (const char *)p + 10, gtrid, (const char *)p + 10 + gtrid, bqual);
  return true;
}

/* prepare(all): the end of the transaction (COMMIT with the binlog, XA PREPARE)
   or, with all=false in autocommit, of the statement that is the transaction. */
static int tidesdb_prepare(THD *thd, bool all) {
  tdb_trx *trx = get_trx(thd, false);
  if (!trx || !tdb_trx_is_active(trx) || !ends_transaction(thd, all)) return 0;
  XID xid;
  thd_get_xid(thd, (MYSQL_XID *)&xid);
  std::string b = xid_bytes(xid);
  int st = wsrep_store_position(thd, trx);
  if (!st) st = tdb_trx_prepare(trx, (const uint8_t *)b.data(), b.size());
  if (st) {
    sql_print_warning("TidesDB: prepare failed: %s", tdb_last_error());
    int err = to_ha_error(st, thd);
    if (err == HA_ERR_DISK_FULL) raise_disk_full();
    return err;
  }
  return 0;
}

struct Recovered_xids {
  XID *list;
  uint len;
  uint n;
};

static void collect_xid(void *ctx, const uint8_t *xid, size_t len) {
  Recovered_xids *r = static_cast<Recovered_xids *>(ctx);
  if (r->n < r->len && xid_from_bytes(xid, len, &r->list[r->n])) r->n++;
}

static int tidesdb_recover(XID *xid_list, uint len) {
  Recovered_xids r = {xid_list, len, 0};
  tdb_xa_recover(collect_xid, &r);
  return (int)r.n;
}

/* X/Open XA return codes (xa.h; the server only tests for non-zero, and relies on
   XAER_NOTA for an xid the engine does not know). */
enum { TDB_XA_OK = 0, TDB_XAER_RMERR = -3, TDB_XAER_NOTA = -4 };

static int xa_result(int st) {
  if (st == TDB_NOT_FOUND) return TDB_XAER_NOTA;
  return st ? TDB_XAER_RMERR : TDB_XA_OK;
}

static int tidesdb_commit_by_xid(XID *xid) {
  std::string b = xid_bytes(*xid);
  return xa_result(tdb_xa_commit((const uint8_t *)b.data(), b.size()));
}

static int tidesdb_rollback_by_xid(XID *xid) {
  std::string b = xid_bytes(*xid);
  return xa_result(tdb_xa_rollback((const uint8_t *)b.data(), b.size()));
}

static int tidesdb_savepoint_set(THD *thd, void *sv) {
  tdb_trx *trx = get_trx(thd, true);
  uint64_t id = 0;
  int st = tdb_trx_savepoint_set(trx, &id);
  memcpy(sv, &id, sizeof(id));
  return st ? to_ha_error(st, thd) : 0;
}

/* The engine savepoint id kept in the server's savepoint area. */
static uint64_t savepoint_id(const void *sv) {
  uint64_t id;
  memcpy(&id, sv, sizeof(id));
  return id;
}

static int tidesdb_savepoint_rollback(THD *thd, void *sv) {
  int st = tdb_trx_savepoint_rollback(get_trx(thd, true), savepoint_id(sv));
  return st ? to_ha_error(st, thd) : 0;
}

static int tidesdb_savepoint_release(THD *thd, void *sv) {
  int st = tdb_trx_savepoint_release(get_trx(thd, true), savepoint_id(sv));
  return st ? to_ha_error(st, thd) : 0;
}

static bool tidesdb_savepoint_can_release_mdl(THD *) { return true; }

static int tidesdb_close_connection(THD *thd) {
  tdb_trx *trx = get_trx(thd, false);
  if (trx) {
    tdb_trx_free(trx);
    thd_set_ha_data(thd, tidesdb_hton, NULL);
  }
  return 0;
}

/* KILL QUERY: wake the connection's lock wait. */
static void tidesdb_kill_query(THD *thd, enum thd_kill_levels) {
  if (tdb_trx *trx = get_trx(thd, false)) tdb_trx_cancel(trx);
}

static int tidesdb_start_consistent_snapshot(THD *thd) {
  tdb_trx *trx = get_trx(thd, true);
  if (!trx) return 1;
  if (int st = tdb_trx_begin(trx, isolation_of(thd))) return to_ha_error(st, thd);
  if (int st = tdb_trx_snapshot(trx)) return to_ha_error(st, thd);
  trans_register_ha(thd, true, tidesdb_hton, 0);
  return 0;
}

/* ------------------------------------------------------------- engine-wide */

static handler *tidesdb_create_handler(handlerton *hton, TABLE_SHARE *share, MEM_ROOT *root) {
  return new (root) ha_tidesdb(hton, share);
}

static void tidesdb_drop_database(char *path) {
  if (int st = tdb_database_drop(path))
    sql_print_error("TidesDB: dropping the tables of %s failed: %s (status %d)", path,
                    tdb_last_error(), st);
}

static bool tidesdb_show_status(THD *thd, stat_print_fn *print,
                                enum ha_stat_type stat) {
  if (stat != HA_ENGINE_STATUS) return false;
  const char *text = nullptr;
  size_t len = tdb_engine_status(&text);
  if (!text) return true;
  return print(thd, "TIDESDB", 7, "", 0, text, (uint)len);
}

static int tidesdb_panic(enum ha_panic_function) { return 0; }

/* DDL recovery after a crash in an in-place ALTER TABLE whose new .frm was written:
   0 (use the new definition) if the engine's stored definition is no longer the one
   the ALTER started from (create_id = handler::table_version() after the prepare),
   i.e. tdb_index_build_commit committed; otherwise the old .frm stays, matching the
   engine's catalog (an ADD INDEX killed while building). A partitioned table has
   no catalog entry of its own (its partitions have) and the server asks with
   create_id 0: 0 if the switch of all its partitions to the new definition
   (`version`, the new .frm's id) committed (tdb_rebuild_commit_group). */
static int tidesdb_check_version(const char *path, const LEX_CUSTRING *version,
                                 ulonglong create_id) {
  uint64_t now = 0;
  int st = tdb_table_version_by_name(path, &now);
  if (st == 0) return now != create_id ? 0 : 1;
  int done = 0;
  if (st == TDB_NO_SUCH_TABLE && version && version->str && version->length &&
      tdb_rebuild_group_committed(path, version->str, version->length, &done) == 0 && done)
    return 0;
  return 1;
}

static int tidesdb_init(void *p) {
  tidesdb_hton = static_cast<handlerton *>(p);
  std::string dir = std::string(mysql_real_data_home) + ENGINE_DIR_NAME;
  struct tdb_engine_options opts;
  opts.write_buffer_size = sysvar_write_buffer_size;
  opts.block_cache_size = sysvar_block_cache_size;
  opts.sync_mode = engine_sync_mode(sysvar_sync_mode);
  opts.sync_interval_ms = sysvar_sync_interval_ms;
  opts.background_threads = sysvar_background_threads;
  opts.use_direct_reads = sysvar_use_direct_reads ? 1 : 0;
  opts.force_recovery = sysvar_force_recovery;
  opts.encrypt_log = sysvar_encrypt_log ? 1 : 0;
  opts.encrypt_catalog = tidesdb_encrypt_tables != TIDESDB_ENCRYPT_OFF ? 1 : 0;
  opts.key_latest_version = server_key_latest_version;
  opts.key_get = server_key_get;
  tdb_ft_set_min_token_size(sysvar_ft_min_token_size);
  tdb_ft_set_max_token_size(sysvar_ft_max_token_size);
  if (int st = tdb_engine_open(dir.c_str(), &opts)) {
    sql_print_error("TidesDB: cannot open %s: %s (status %d)", dir.c_str(), tdb_last_error(),
                    st);
    return 1;
  }
  tdb_engine_set_lock_escalation_threshold(sysvar_lock_escalation_threshold);
  sql_print_information("TidesDB: opened %s", dir.c_str());
  if (sysvar_force_recovery)
    sql_print_warning("TidesDB: started with tidesdb_force_recovery=%u: the engine is "
                      "read-only; dump the tables, then restart without it",
                      sysvar_force_recovery);
  {
    /* Damaged table files were set aside instead of stopping the engine: say so. */
    const char *damaged = nullptr;
    size_t len = tdb_engine_damaged_files(&damaged);
    std::string text = damaged ? std::string(damaged, len) : std::string();
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      if (end > start)
        sql_print_error("TidesDB: %s", text.substr(start, end - start).c_str());
      start = end + 1;
    }
  }
  ignore_db_dirs_append(ENGINE_DIR_NAME);

  handlerton *h = tidesdb_hton;
  h->create = tidesdb_create_handler;
  /* HTON_SUPPORTS_EXTENDED_KEYS, as InnoDB: a secondary index entry is keyed by
     the index's columns then the primary key's (ha_tidesdb.cc, Format), so the
     optimizer may see every non-unique secondary key as (key parts + the primary
     key parts it lacks): ORDER BY pk after an equality on the key reads index
     order, ranges and refs go on into the primary key. key_codec.h (Extended keys)
     maps such key images to the stored key's prefixes. */
  h->flags = HTON_SUPPORTS_EXTENDED_KEYS;
  TIDESDB_HTON_SET(h, commit, tidesdb_commit);
  TIDESDB_HTON_SET(h, rollback, tidesdb_rollback);
  TIDESDB_HTON_SET(h, prepare, tidesdb_prepare);
  TIDESDB_HTON_SET(h, recover, tidesdb_recover);
  TIDESDB_HTON_SET(h, commit_by_xid, tidesdb_commit_by_xid);
  TIDESDB_HTON_SET(h, rollback_by_xid, tidesdb_rollback_by_xid);
  h->savepoint_offset = sizeof(uint64_t);
  TIDESDB_HTON_SET(h, savepoint_set, tidesdb_savepoint_set);
  TIDESDB_HTON_SET(h, savepoint_rollback, tidesdb_savepoint_rollback);
  TIDESDB_HTON_SET(h, savepoint_release, tidesdb_savepoint_release);
  TIDESDB_HTON_SET(h, savepoint_rollback_can_release_mdl, tidesdb_savepoint_can_release_mdl);
  TIDESDB_HTON_SET(h, close_connection, tidesdb_close_connection);
  TIDESDB_HTON_SET(h, start_consistent_snapshot, tidesdb_start_consistent_snapshot);
  TIDESDB_HTON_SET(h, commit_ordered, tidesdb_commit_ordered);
  TIDESDB_HTON_SET(h, commit_checkpoint_request, tidesdb_commit_checkpoint_request);
  TIDESDB_HTON_SET(h, kill_query, tidesdb_kill_query);
  TIDESDB_HTON_SET(h, drop_database, tidesdb_drop_database);
  TIDESDB_HTON_SET(h, show_status, tidesdb_show_status);
  TIDESDB_HTON_SET(h, panic, tidesdb_panic);
  TIDESDB_HTON_SET(h, check_version, tidesdb_check_version);
  h->prepare_for_backup = tidesdb::prepare_for_backup;
  h->end_backup = tidesdb::end_backup;
  h->tablefile_extensions = hton_no_exts;
  h->table_options = tidesdb::table_option_list;
  TIDESDB_INIT_OPTIMIZER_COSTS(h);
  tidesdb::wsrep_init_handlerton(h);
  return 0;
}

static int tidesdb_deinit(void *) {
  if (int st = tdb_engine_close())
    sql_print_error("TidesDB: closing the engine failed: %s (status %d)", tdb_last_error(), st);
  return 0;
}

static struct st_mysql_storage_engine tidesdb_storage_engine = {
    MYSQL_HANDLERTON_INTERFACE_VERSION};

maria_declare_plugin(tidesdb){
    MYSQL_STORAGE_ENGINE_PLUGIN,
    &tidesdb_storage_engine,
    "TidesDB",
    "TidesDB for MariaDB authors",
    "LSM-tree transactional storage engine written in Rust",
    PLUGIN_LICENSE_GPL,
    tidesdb_init,
    tidesdb_deinit,
    0x0001,
    tidesdb::status_variables,
    tidesdb_system_variables,
    "0.1.0",
    MariaDB_PLUGIN_MATURITY_BETA},
    TIDESDB_FT_INFORMATION_SCHEMA_PLUGINS maria_declare_plugin_end;
