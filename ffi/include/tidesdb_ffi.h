/*
 * tidesdb_ffi.h: the C ABI between the C++ handler shim and the Rust engine.
 *
 * This header is the single source of the ABI. Its Rust side is ffi/src/ (the
 * `#[no_mangle] extern "C"` functions); `cargo test -p tidesdb-ffi` checks that every
 * function declared here is exported there with the same name.
 *
 * Rules, on both sides:
 *  - No Rust panic crosses this boundary: every entry point catches it and returns
 *    TDB_INTERNAL (the message is kept for tdb_last_error()).
 *  - No server pointer (THD*, TABLE*, Field*) is ever passed in: the shim translates
 *    rows and keys to bytes first. Rust never keeps a pointer the caller passed in past
 *    the call.
 *  - Buffers returned by Rust (const uint8_t **out, size_t *out_len) stay valid until
 *    the next call on the same handle (table or cursor); the shim copies what it keeps.
 *  - Handles are owned by the caller of the function that made them and released by
 *    the matching *_free / *_close.
 */
#ifndef TIDESDB_FFI_H
#define TIDESDB_FFI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Status codes returned by every call that can fail. */
enum tdb_status {
  TDB_OK = 0,
  TDB_NOT_FOUND = 1,      /* no such key / row */
  TDB_END = 2,            /* cursor moved past its last key */
  TDB_DUPLICATE = 3,      /* a unique check failed; see failed_op */
  TDB_CONFLICT = 4,       /* write-write conflict: retry the transaction */
  TDB_LOCK_TIMEOUT = 5,   /* lock wait timed out: the statement is rolled back */
  TDB_DEADLOCK = 6,       /* deadlock victim: the transaction is rolled back */
  TDB_NO_SUCH_TABLE = 7,  /* the table is not in the engine's catalog */
  TDB_TABLE_EXISTS = 8,
  TDB_CORRUPTION = 9,     /* a checksum or format error in a data file */
  TDB_IO_ERROR = 10,      /* the OS refused a read, write or sync */
  TDB_READ_ONLY = 11,     /* the engine refuses writes (after a failed sync; force_recovery) */
  TDB_INVALID = 12,       /* bad argument (a bug in the caller) */
  TDB_NOT_OPEN = 13,      /* the engine is not open (plugin init failed) */
  TDB_INTERNAL = 14,      /* a bug in the engine (a caught panic) */
  TDB_ABORTED = 15,       /* the wait was cancelled (KILL QUERY) */
  TDB_DISK_FULL = 16,     /* the OS refused a write: no space left (ENOSPC, EDQUOT) */
  TDB_FK_MALFORMED = 17,  /* a FOREIGN KEY the engine cannot enforce (no index, types) */
  TDB_KEY_UNAVAILABLE = 18, /* an encrypted table's key is not in the key management plugin */
  TDB_DISCARDED = 19,     /* the table's data was discarded (DISCARD TABLESPACE) */
  TDB_NOT_DISCARDED = 20, /* IMPORT TABLESPACE of a table that has its data */
  TDB_SCHEMA_MISMATCH = 21, /* exported files that do not fit the table's definition */
  TDB_STALE = 22          /* what the caller resolved against changed: resolve again, retry */
};

/* The message for the last non-OK status returned on the calling thread. */
const char *tdb_last_error(void);

/* ---- Engine lifecycle ------------------------------------------------------- */

enum tdb_sync_mode { TDB_SYNC_NONE = 0, TDB_SYNC_INTERVAL = 1, TDB_SYNC_FULL = 2 };

struct tdb_engine_options {
  uint64_t write_buffer_size;   /* bytes of memtable per column family before a flush */
  uint64_t block_cache_size;    /* bytes */
  uint32_t sync_mode;           /* enum tdb_sync_mode */
  uint32_t sync_interval_ms;    /* for TDB_SYNC_INTERVAL */
  uint32_t background_threads;  /* flush + compaction threads */
  uint32_t use_direct_reads;    /* 0 or 1 */
  uint32_t force_recovery;      /* tidesdb_force_recovery: 0 = off, 1..3 = read-only levels */
  uint32_t encrypt_log;         /* tidesdb_encrypt_log: 1 = new WAL segments encrypted (key 1) */
  uint32_t encrypt_catalog;     /* tidesdb_encrypt_tables != OFF: 1 = the catalog encrypted (key 1) */
  /* The server's key management (encryption_key_get_latest_version / encryption_key_get);
     NULL without a plugin: encrypted tables are then refused with TDB_KEY_UNAVAILABLE. */
  uint32_t (*key_latest_version)(uint32_t key_id);
  uint32_t (*key_get)(uint32_t key_id, uint32_t version, unsigned char *buf, uint32_t *len);
};

/* Opens (creating if needed) the engine's directory and recovers it. Once per process. */
int tdb_engine_open(const char *dir, const struct tdb_engine_options *opts);
/* Flushes and closes the engine. Further calls return TDB_NOT_OPEN. */
int tdb_engine_close(void);
void tdb_engine_set_sync_mode(uint32_t mode, uint32_t interval_ms);
/* Resizes the block cache (a smaller size evicts at once). */
void tdb_engine_set_block_cache_size(uint64_t bytes);
/* Row locks one transaction may hold in one column family before they are replaced
   by one table lock of the strongest mode held there (0 = never); at once. */
void tdb_engine_set_lock_escalation_threshold(uint64_t locks);
/* Writes a human-readable status report (SHOW ENGINE TIDESDB STATUS: the counters,
   then every table's column families with their options, levels and table files);
   returns its length. The text stays valid until the next call of this function on
   the same thread. */
size_t tdb_engine_status(const char **out);
/* One line per table file the engine set aside when it opened because its footer,
   index or filter block was damaged (or the file was missing): the table and the
   error that reads of its key range get. Empty text when there is none. Valid until
   the next call of this function on the same thread; returns the length. */
size_t tdb_engine_damaged_files(const char **out);

/* Checkpoint of the engine at one commit point into the new directory `path` (must
   not exist; its parent must; hard links where on the datadir's filesystem), `note`
   appended to its CHECKPOINT file; `*sequence` (if not NULL) gets its commit
   sequence. A directory called `path` exists only once complete. */
int tdb_engine_checkpoint(const char *path, const char *note, uint64_t *sequence);
/* TDB_OK if `path` is acceptable as a checkpoint destination (absolute, no . or ..);
   otherwise an error with tdb_last_error() saying why. */
int tdb_checkpoint_check_path(const char *path);
/* 1 if the directory `path` would be created in is `dir` or inside it (symlinks
   resolved), else 0. */
int tdb_checkpoint_in_dir(const char *path, const char *dir);

/* The engine's counters since the server started (SHOW GLOBAL STATUS); those
   marked gauge are current values instead. */
struct tdb_engine_counters {
  uint64_t commits;             /* transactions committed */
  uint64_t rollbacks;           /* transactions rolled back */
  uint64_t lock_waits;          /* row lock requests that had to wait */
  uint64_t lock_wait_timeouts;  /* ... that gave up (ER_LOCK_WAIT_TIMEOUT) */
  uint64_t deadlocks;           /* lock requests refused as deadlock victims */
  uint64_t lock_escalations;    /* row locks of a transaction in one column family
                                   replaced by a table lock */
  uint64_t write_conflicts;     /* commits refused: a newer committed write of a key */
  uint64_t block_cache_hits;
  uint64_t block_cache_misses;
  uint64_t block_cache_bytes;   /* gauge */
  uint64_t wal_bytes_written;
  uint64_t wal_syncs;
  uint64_t commit_groups;       /* WAL appends by group-commit leaders */
  uint64_t table_bytes_written; /* table files written by flushes and compactions */
  uint64_t memtable_flushes;
  uint64_t compactions;
  uint64_t write_stalls;        /* commit groups stopped by too many unflushed memtables
                                   or L0 files */
  uint64_t write_slowdowns;     /* commit groups delayed by many L0 files */
  uint64_t table_files;         /* gauge */
  uint64_t live_bytes;          /* gauge: table files + memtables */
  uint64_t memtable_bytes;      /* gauge */
  uint64_t pending_compaction_bytes; /* gauge */
  uint64_t table_block_reads;   /* data blocks reads and scans read from table files
                                   (block cache misses; not compaction inputs) */
  uint64_t table_disk_reads;    /* ... of them that waited on the disk (not in the OS
                                   page cache; every one with use_direct_reads) */
  uint64_t compaction_paced_millis; /* ms background compactions waited for their pace */
};
int tdb_engine_counters_get(struct tdb_engine_counters *out);

/* ---- Tables (DDL) ------------------------------------------------------------
 * A table is named by the server's path, e.g. "./db/t1" or "./db/#sql-alter-1f-2".
 * It owns one column family for its rows and one per index (n_indexes counts the
 * secondary indexes; index numbers 1..n_indexes address them, 0 is the rows). */

enum tdb_compression { TDB_COMPRESSION_NONE = 0, TDB_COMPRESSION_ZSTD = 1 };

/* Options of a new table's column families (rows and every index), persisted by the
   engine with them (the table options COMPRESSION, COMPRESSION_LEVEL, BLOOM_BITS,
   BLOCK_SIZE, VALUE_THRESHOLD). */
struct tdb_table_options {
  uint32_t compression;                 /* enum tdb_compression */
  int32_t compression_level;            /* zstd level, -7..22 */
  uint32_t bloom_bits_per_key;          /* 0 disables the bloom filters; at most 64 */
  uint32_t block_size;                  /* bytes of a data block before compression, 512..1 MiB */
  uint64_t value_separation_threshold;  /* values of at least this many bytes go to the
                                           value log; 0 = never */
  uint32_t encrypted;                   /* 1: files encrypted with encryption_key_id */
  uint32_t encryption_key_id;           /* a key id of the key management plugin */
};

/* auto_increment: the AUTO_INCREMENT=N table option (1 when not given).
   opts: NULL for the engine's defaults; TDB_INVALID for out-of-range values. */
int tdb_table_create(const char *name, uint32_t n_indexes, uint64_t auto_increment,
                     const struct tdb_table_options *opts);
/* As tdb_table_create, for a table whose rows carry a column definition version
   (ffi/src/columns.rs): ids[i] and flags[i] (TDB_COLUMN_BLOB) describe its i-th
   stored column in version 1. */
#define TDB_COLUMN_BLOB 1u
int tdb_table_create_columns(const char *name, uint32_t n_indexes, uint64_t auto_increment,
                             const struct tdb_table_options *opts, const uint32_t *ids,
                             const uint8_t *flags, size_t n_columns);
int tdb_table_drop(const char *name);
/* lock_wait_ms: how long the first rename of a copying ALTER TABLE of a table
   FOREIGN KEYs reference waits for the children's checks holding locks in its
   families (TDB_LOCK_TIMEOUT: not renamed); they wait until the copy has the
   name or the old table is dropped (ffi/src/foreign_keys.rs, fence_rename). */
int tdb_table_rename(const char *from, const char *to, uint64_t lock_wait_ms);
/* Empties the table (new empty column families) and resets its counters. */
int tdb_table_truncate(const char *name);
/* Drops every table whose name starts with db_path ("./db/"), for DROP DATABASE. */
int tdb_database_drop(const char *db_path);

/* Transportable tables (ffi/src/transport): FLUSH TABLES ... FOR EXPORT writes
   <base>.tdb (the table's entries) and <base>.cfg (what they are and the definition
   lines they fit: lines[0..n), the shim's description of the table); export_end
   removes both (UNLOCK TABLES). discard empties the table and marks it discarded
   (tdb_table_is_discarded: 1); import (TDB_NOT_DISCARDED, TDB_SCHEMA_MISMATCH,
   TDB_KEY_UNAVAILABLE, TDB_CORRUPTION ...) adopts <name>.tdb / <name>.cfg as its
   data and removes them; on any error the table stays discarded and unchanged. */
int tdb_table_export(struct tdb_table *table, const char *base, const char *const *lines,
                     size_t n);
int tdb_table_export_end(const char *base);
int tdb_table_discard(const char *name);
int tdb_table_import(struct tdb_table *table, const char *name, const char *const *lines,
                     size_t n);
int tdb_table_is_discarded(struct tdb_table *table);

typedef struct tdb_table tdb_table;

/* Opens a per-handler table handle. */
int tdb_table_open(const char *name, tdb_table **out);
void tdb_table_close(tdb_table *table);
uint32_t tdb_table_index_count(const tdb_table *table);
/* Identifies the table's stored definition (its column families): changed by every
   committed in-place index change (tdb_index_build_commit), never 0 (0: table is
   NULL). by_name reads the catalog (TDB_NO_SUCH_TABLE if absent): what the server's
   DDL recovery asks after a crash in an in-place ALTER TABLE. */
uint64_t tdb_table_version(const tdb_table *table);
/* The table's column definition versions: *n receives the number of values; they are
   written to out when cap is at least that: current version, number of versions, then
   per version (ascending) its number, its number of stored columns and per column
   (in row order) its id and flags. *n = 0: a table without versions. */
int tdb_table_columns(const tdb_table *table, uint32_t *out, size_t cap, size_t *n);
int tdb_table_version_by_name(const char *name, uint64_t *out);
/* 1 if an unresolved prepared XA transaction wrote rows of the table (one whose
   connection went away holds no metadata lock on it), else 0. */
int tdb_table_has_prepared_writes(const tdb_table *table);
/* 1 if the unique indexes `unique` (n engine index numbers, in the server's key
   order) are checked in another order (the order the indexes were created in,
   after an in-place ADD UNIQUE: as InnoDB), so a row's duplicates are not reported
   in ascending key order; 0 otherwise. */
int tdb_table_dup_keys_not_in_order(const tdb_table *table, const uint32_t *unique, uint32_t n);
/* Next hidden row id for a table without a primary key (unique, increasing). */
uint64_t tdb_table_next_rowid(tdb_table *table);

/* AUTO_INCREMENT counter (the next value to hand out), shared by the table's
   handlers. 0 until seeded: the shim seeds it once per process from the largest
   value stored (tdb_table_autoinc_seed keeps the larger of that and the table's
   AUTO_INCREMENT option). */
uint64_t tdb_table_autoinc_peek(tdb_table *table);
/* Returns the counter, 0 on error (tdb_last_error); reserving then fails too. */
uint64_t tdb_table_autoinc_seed(tdb_table *table, uint64_t next);
/* Reserves n values spaced by increment starting at the first value >= the counter
   that is offset modulo increment; returns that first value. The counter never
   passes max + 1 (max: the column's largest value), as in InnoDB. */
uint64_t tdb_table_autoinc_reserve(tdb_table *table, uint64_t n, uint64_t offset,
                                   uint64_t increment, uint64_t max);
/* Records that value is stored (explicit values move the counter past them). */
void tdb_table_autoinc_observe(tdb_table *table, uint64_t value, uint64_t max);
/* Only the persisted counter moves past value (what a restart starts from): an
   insert refused by a secondary unique key after InnoDB's clustered index took it. */
void tdb_table_autoinc_persist(tdb_table *table, uint64_t value, uint64_t max);

/* Bytes count table files, value-log files and memtables; free_bytes is the
   dead part of the value-log files (reclaimed by GC or OPTIMIZE TABLE). */
struct tdb_table_stats {
  uint64_t approx_rows;
  uint64_t data_bytes;
  uint64_t index_bytes;
  uint64_t free_bytes;
  /* The engine's latest committed sequence number, read before the sizes: while it
     is unchanged no transaction has committed (a count of the rows still holds). */
  uint64_t committed_seq;
};
int tdb_table_stats(tdb_table *table, struct tdb_table_stats *out);
/* Approximate number of keys of an index between two encoded bounds (NULL = open). */
uint64_t tdb_table_keys_in_range(tdb_table *table, uint32_t index, const uint8_t *lo,
                                 size_t lo_len, const uint8_t *hi, size_t hi_len);
/* About n keys of an index spread evenly (by entries) over its whole key range,
   in order, each passed to found (the buffer is valid during the call); from the
   memtables and the table files' index blocks, no data read. Seeking to each and
   reading a few entries samples the index (statistics of a large index). */
int tdb_table_sample_keys(tdb_table *table, uint32_t index, uint32_t n,
                          void (*found)(void *ctx, const uint8_t *key, size_t len), void *ctx);
/* Optimizer statistics of the table (the shim's own serialisation of what ANALYZE
   TABLE measured), kept in the catalog so they survive restarts. load returns
   TDB_NOT_FOUND when none were saved; *blob stays valid until the next call on
   table. save: durable nonzero commits at once (ANALYZE TABLE); 0 queues the put
   for the next commit group (no commit or fsync of its own; lost by a crash
   before any later commit). */
int tdb_table_stats_save(tdb_table *table, const uint8_t *blob, size_t len, int durable);
int tdb_table_stats_load(tdb_table *table, const uint8_t **blob, size_t *len);
/* Nonzero when a table whose statistics were measured with measured_rows rows,
   changed row changes and ms_since milliseconds ago is due to be measured again
   (innodb_stats_auto_recalc's tenth of the rows, at most every 10 s unless the
   table more than doubled: ffi/src/optimizer_stats.rs). */
int tdb_stats_recalc_due(uint64_t measured_rows, uint64_t changed, uint64_t ms_since);

/* Compacts one column family of the table (index 0 = rows); as OPTIMIZE TABLE:
   also relocates value-log values of files with any garbage, and flushes every
   memtable first so the WAL empties. */
int tdb_table_compact_index(tdb_table *table, uint32_t index);
/* Compacts the column family of the table's BLOB/TEXT values stored outside
   the row (the last step of OPTIMIZE TABLE). */
int tdb_table_compact_external(tdb_table *table);

/* Microseconds an online build that wrote rows_done rows in elapsed_us waits
   before it goes on, to stay at or under rows_per_second (0: unlimited). */
uint64_t tdb_build_pace_us(uint64_t rows_done, uint64_t elapsed_us, uint64_t rows_per_second);

/* ---- In-place index changes (ALTER TABLE ... ADD/DROP/RENAME INDEX) ----------
 * tdb_index_build_begin creates n empty column families (slots 0..n-1) for new
 * indexes; no catalog entry names them yet, so they are invisible, and dropped by
 * tdb_index_build_free (or, after a crash, at the next start) unless committed.
 * tdb_index_build_put adds one entry to a slot, committing in bounded batches;
 * with unique != 0 an existing key gives TDB_DUPLICATE. tdb_index_build_commit
 * commits the table's new list of secondary indexes in one transaction: layout[i]
 * is the i-th secondary index of the new definition, either an existing index
 * (1..n_indexes of the current definition) or TDB_LAYOUT_BUILT | slot. Indexes of
 * the current definition missing from layout are dropped (space reclaimed at once).
 * When kept indexes move and FOREIGN KEYs reference the table, the commit first
 * waits up to lock_wait_ms for the children's checks holding locks in its families
 * (TDB_LOCK_TIMEOUT: nothing changed). The table's saved statistics are discarded. */
typedef struct tdb_index_build tdb_index_build;
#define TDB_LAYOUT_BUILT 0x80000000u
int tdb_index_build_begin(const char *name, uint32_t n, tdb_index_build **out);
int tdb_index_build_put(tdb_index_build *build, uint32_t slot, const uint8_t *key,
                        size_t key_len, const uint8_t *value, size_t value_len, int unique);
int tdb_index_build_commit(tdb_index_build *build, const char *name, const uint32_t *layout,
                           size_t n, uint64_t lock_wait_ms);
void tdb_index_build_free(tdb_index_build *build);
/* Makes the commit also install the table's next column definition version: its i-th
   stored column (of n) is the current version's stored column sources[i], or a new
   one (TDB_NEW_COLUMN), with flags[i]. ids (n) receives their column ids, *version
   the version's number. TDB_INVALID for a table without versions. */
#define TDB_NEW_COLUMN 0xFFFFFFFFu
int tdb_index_build_set_columns(tdb_index_build *build, const uint32_t *sources,
                                const uint8_t *flags, size_t n, uint32_t *ids,
                                uint32_t *version);
/* An online build (ALTER TABLE ... LOCK=NONE): publishes the build's families on the
 * table, so that tdb_apply ops of index TDB_BUILDING_INDEX | slot (of any handle of
 * the table, in any transaction) write to built index slot, until the build commits
 * or is freed; such ops are skipped once it has ended. The shim then fills the
 * families itself with tdb_apply (not tdb_index_build_put). A published build that
 * is freed without committing leaves its families, unnamed, to the table's next
 * build or the next start (a transaction may still hold writes to them). */
int tdb_index_build_publish(tdb_index_build *build);
#define TDB_BUILDING_INDEX 0x80000000u

/* ---- Online rebuild (ALTER TABLE ... ALGORITHM=INPLACE, LOCK=NONE that rewrites
 * rows; ffi/src/rebuild.rs says why it is correct) ------------------------------
 * tdb_rebuild_begin (with the table held exclusively by the server) creates the
 * families of a new table (rows, n_indexes secondary indexes, external values;
 * its column version 1: n_columns stored columns with ids / flags) that no catalog
 * entry names, and starts logging the row keys every tdb_apply on the table writes.
 * tdb_rebuild_put / tdb_rebuild_delete write the new families (index 0 = rows,
 * 1.. = secondary indexes, TDB_BLOB_INDEX = external values) in bounded batches;
 * with unique != 0 an existing key gives TDB_DUPLICATE. tdb_rebuild_take_log takes
 * the keys logged since the last call (key order; tdb_rebuild_logged_key reads the
 * i-th). tdb_rebuild_commit (the table held exclusively, the log replayed) makes
 * the table the rebuilt one in one catalog transaction and drops the old families;
 * tdb_rebuild_free without a commit drops the new ones and stops the log. */
typedef struct tdb_rebuild tdb_rebuild;
/* sources[i]: the i-th secondary index of the new definition is index sources[i]
   (1-based) of the current one, or new (0): the new table keeps the order the
   indexes were created in. */
int tdb_rebuild_begin(const char *name, const uint32_t *sources, size_t n_indexes,
                      const uint32_t *ids, const uint8_t *flags, size_t n_columns,
                      tdb_rebuild **out);
/* As tdb_table_columns, for the new table. */
int tdb_rebuild_columns(tdb_rebuild *build, uint32_t *out, size_t cap, size_t *n);
int tdb_rebuild_put(tdb_rebuild *build, uint32_t index, const uint8_t *key, size_t key_len,
                    const uint8_t *value, size_t value_len, int unique);
int tdb_rebuild_delete(tdb_rebuild *build, uint32_t index, const uint8_t *key,
                       size_t key_len);
int tdb_rebuild_take_log(tdb_rebuild *build, size_t *n);
int tdb_rebuild_logged_key(tdb_rebuild *build, size_t i, const uint8_t **key, size_t *len);
/* lock_wait_ms: how long the switch waits for transactions whose FOREIGN KEY
   checks hold locks in the table's families (TDB_LOCK_TIMEOUT after it). */
int tdb_rebuild_commit(tdb_rebuild *build, uint64_t lock_wait_ms);
/* tdb_rebuild_commit of n rebuilds (the partitions of one partitioned table, each
   replayed) in one catalog transaction: every table switches or none does. With
   path (the partitioned table's, not NULL), the transaction also records that
   its switch to the definition `version` (the server's id of the new .frm)
   committed, which tdb_rebuild_group_committed answers after a crash (the
   server's DDL recovery asks by the partitioned table's path). Each build is
   freed by the caller afterwards, as after tdb_rebuild_commit. */
int tdb_rebuild_commit_group(tdb_rebuild *const *builds, size_t n, const char *path,
                             const uint8_t *version, size_t version_len,
                             uint64_t lock_wait_ms);
/* *out = 1 if the last group switch of partitioned table `path` recorded
   definition `version`, else 0. */
int tdb_rebuild_group_committed(const char *path, const uint8_t *version, size_t version_len,
                                int *out);
void tdb_rebuild_free(tdb_rebuild *build);

/* ---- Transactions --------------------------------------------------------------
 * One tdb_trx per connection (THD). Begin is implicit: the first statement starts
 * it. Statements nest inside with an implicit savepoint so that a failing statement
 * undoes only itself. */

enum tdb_isolation {
  TDB_ISO_READ_UNCOMMITTED = 0,
  TDB_ISO_READ_COMMITTED = 1,
  TDB_ISO_REPEATABLE_READ = 2,
  TDB_ISO_SERIALIZABLE = 3
};

typedef struct tdb_trx tdb_trx;

tdb_trx *tdb_trx_new(void);
/* Rolls back whatever is active and frees. */
void tdb_trx_free(tdb_trx *trx);
/* Starts the transaction if none is active (isolation: enum tdb_isolation). */
int tdb_trx_begin(tdb_trx *trx, uint32_t isolation);
/* Takes a fresh consistent snapshot now (START TRANSACTION WITH CONSISTENT SNAPSHOT). */
int tdb_trx_snapshot(tdb_trx *trx);
int tdb_trx_is_active(const tdb_trx *trx);
/* Marks the start of a statement (savepoint; READ COMMITTED refreshes its snapshot).
   Idempotent until the statement ends. */
int tdb_trx_stmt_begin(tdb_trx *trx);
/* Ends the statement keeping its writes (the transaction goes on). */
int tdb_trx_stmt_commit(tdb_trx *trx);
/* Undoes the statement's writes only. */
int tdb_trx_stmt_rollback(tdb_trx *trx);
int tdb_trx_commit(tdb_trx *trx);
/* The server's commit_ordered(): makes the commit visible now, in the order the
   server calls it for every engine; a prepared transaction's commit record is not
   waited for (its prepare is durable; tdb_sync_wal makes the commits durable).
   Keeps the outcome for the tdb_trx_commit that follows, which returns it. May be
   called from another session's thread. */
void tdb_trx_commit_ordered(tdb_trx *trx);
/* Makes every commit written so far durable (the server's commit checkpoint
   request). */
int tdb_sync_wal(void);
int tdb_trx_rollback(tdb_trx *trx);
/* Two-phase commit (XA, and the binlog's group commit). Prepare makes the
   transaction's writes durable but invisible and keeps its locks; tdb_trx_commit /
   tdb_trx_rollback then resolve it. A prepared transaction whose connection goes
   away (tdb_trx_free) is detached, not rolled back: it stays prepared, with its
   locks, until tdb_xa_commit / tdb_xa_rollback, also across restarts. On error the
   transaction stays active and unprepared. */
int tdb_trx_prepare(tdb_trx *trx, const uint8_t *xid, size_t xid_len);
/* Resolves a detached prepared transaction; TDB_NOT_FOUND for an unknown xid. */
int tdb_xa_commit(const uint8_t *xid, size_t xid_len);
int tdb_xa_rollback(const uint8_t *xid, size_t xid_len);
/* Calls found(ctx, xid, len) for every detached prepared transaction (after a
   restart: those prepared before it); returns how many there are. */
size_t tdb_xa_recover(void (*found)(void *ctx, const uint8_t *xid, size_t xid_len), void *ctx);

/* How long lock waits of this transaction last (innodb_lock_wait_timeout). */
int tdb_trx_set_lock_wait_timeout(tdb_trx *trx, uint64_t millis);
/* SKIP LOCKED for the locking reads that follow (until set to 0): tdb_lock_row does
   not wait (TDB_LOCK_TIMEOUT at once: the shim skips that row) and neither it nor a
   cursor opened meanwhile locks gaps. */
int tdb_trx_set_skip_locked(tdb_trx *trx, int on);
/* Wakes the transaction's current (or next) lock wait with TDB_ABORTED: KILL QUERY.
   Safe to call from another thread while the owner waits. */
void tdb_trx_cancel(tdb_trx *trx);
/* User savepoints: the id is what the shim stores in the server's savepoint area. */
int tdb_trx_savepoint_set(tdb_trx *trx, uint64_t *out_id);
int tdb_trx_savepoint_rollback(tdb_trx *trx, uint64_t id);
int tdb_trx_savepoint_release(tdb_trx *trx, uint64_t id);

/* ---- Row changes ---------------------------------------------------------------
 * A row change is a list of operations applied atomically inside the transaction:
 * either all of them or (on any error) none. */

enum tdb_op_kind {
  TDB_OP_PUT = 0,    /* insert or overwrite key */
  TDB_OP_DELETE = 1, /* remove key (absent key is fine) */
  /* FULLTEXT index (index = its engine index): key = the row's primary key, value =
     the row's document (the index's non-NULL columns in UTF-8, each as u32 LE length
     + bytes); the engine adds / removes the postings of its words. lock must be 0. */
  TDB_OP_FT_PUT = 2,
  TDB_OP_FT_DELETE = 3
};

struct tdb_op {
  uint32_t index;          /* 0 = rows, 1..n = secondary index, TDB_BLOB_INDEX,
                              TDB_BUILDING_INDEX | slot (tdb_index_build_publish) */
  uint32_t kind;           /* enum tdb_op_kind */
  uint32_t lock;           /* 1: take an exclusive lock on the key first (held to the end
                              of the transaction; waits up to the lock wait timeout).
                              0 on a PUT when the first op of the list is a locked op
                              on the rows (index 0): the key is one nobody writes
                              without that row's lock (an index entry holding the
                              primary key), so it is conflict-checked from the time
                              the row lock was granted, like a locked key, without
                              being locked. Otherwise 0 = checked from the snapshot. */
  const uint8_t *key;
  size_t key_len;
  const uint8_t *value;    /* PUT only */
  size_t value_len;
  /* PUT only: when > 0, fail with TDB_DUPLICATE if a key other than `key` itself
     whose first unique_len bytes equal key's is visible, or `key` itself when
     unique_len == key_len. A locked key is checked against the latest committed
     data (and the transaction's own writes), not the snapshot. */
  size_t unique_len;
};

/* On TDB_DUPLICATE, *failed_op is the index in ops of the op whose check failed. */
int tdb_apply(tdb_trx *trx, tdb_table *table, const struct tdb_op *ops, size_t n_ops,
              size_t *failed_op);

/* The engine index of a table's external BLOB/TEXT values (a column family of
   its own; the shim's row format decides what goes there). */
#define TDB_BLOB_INDEX 0xFFFFFFFFu

/* TDB_SCHEMA_MISMATCH if trx's snapshot is older than the entries of engine index
   `index` (0 = rows): the table was rebuilt, or the index added, after it (InnoDB:
   "Table definition has changed, please retry transaction"); else TDB_OK. */
int tdb_index_readable(tdb_trx *trx, tdb_table *tbl, uint32_t index);
/* Point read of index `index` (0 = rows, TDB_BLOB_INDEX = external values) through
   the transaction's view. TDB_NOT_FOUND when absent. *value stays valid until the
   next call on table. */
int tdb_get(tdb_trx *trx, tdb_table *table, uint32_t index, const uint8_t *key,
            size_t key_len, const uint8_t **value, size_t *value_len);

/* As tdb_get, but reads the latest committed version (own writes win), as a
   locking read does; takes no lock. */
int tdb_get_latest(tdb_trx *trx, tdb_table *table, uint32_t index, const uint8_t *key,
                   size_t key_len, const uint8_t **value, size_t *value_len);

/* A value kept alive by its reader (see tdb_get_pinned). */
typedef struct tdb_value tdb_value;

/* As tdb_get (latest = 0) or tdb_get_latest (latest != 0), but *value stays valid
   and unchanged until tdb_value_release(*pin), whatever is called meanwhile: the
   bytes are those the engine holds (for a large value, the block cache's own
   buffer), not a copy. On an error *pin is not set. */
int tdb_get_pinned(tdb_trx *trx, tdb_table *table, uint32_t index, const uint8_t *key,
                   size_t key_len, int latest, tdb_value **pin, const uint8_t **value,
                   size_t *value_len);

/* Releases a value from tdb_get_pinned (NULL is ignored). */
void tdb_value_release(tdb_value *pin);

enum tdb_lock_mode { TDB_LOCK_SHARED = 0, TDB_LOCK_EXCLUSIVE = 1 };

/* Locking read of one row (SELECT ... FOR UPDATE / LOCK IN SHARE MODE, UPDATE,
   DELETE): locks the row's key in the rows column family (waiting up to the lock
   wait timeout; TDB_LOCK_TIMEOUT, TDB_DEADLOCK or TDB_ABORTED otherwise), then
   reads its latest committed version (own writes win). TDB_NOT_FOUND if the row
   no longer exists. */
int tdb_lock_row(tdb_trx *trx, tdb_table *table, const uint8_t *key, size_t key_len,
                 uint32_t mode, const uint8_t **value, size_t *value_len);

/* ---- Cursors ------------------------------------------------------------------ */

enum tdb_seek_mode {
  TDB_SEEK_FIRST = 0,         /* first key of the index */
  TDB_SEEK_LAST = 1,          /* last key of the index */
  TDB_SEEK_GE = 2,            /* first key >= k */
  TDB_SEEK_GT_PREFIX = 3,     /* first key > k that does not start with k */
  TDB_SEEK_LE_PREFIX = 4,     /* last key that is < k or starts with k */
  TDB_SEEK_LT = 5             /* last key < k */
};

typedef struct tdb_cursor tdb_cursor;

int tdb_cursor_open(tdb_trx *trx, tdb_table *table, uint32_t index, tdb_cursor **out);
/* A cursor for locking reads: it reads the latest committed state (re-read at each
   seek) merged with the transaction's own writes, instead of the snapshot, so that
   UPDATE / DELETE / SELECT ... FOR UPDATE see rows committed after the snapshot,
   as in InnoDB. */
int tdb_cursor_open_latest(tdb_trx *trx, tdb_table *table, uint32_t index,
                           tdb_cursor **out);
void tdb_cursor_close(tdb_cursor *cursor);
/* Positions the cursor; TDB_END when no key qualifies. */
int tdb_cursor_seek(tdb_cursor *cursor, uint32_t mode, const uint8_t *key, size_t key_len);
int tdb_cursor_next(tdb_cursor *cursor);
int tdb_cursor_prev(tdb_cursor *cursor);
/* The current entry; valid until the next call on the cursor. */
int tdb_cursor_entry(tdb_cursor *cursor, const uint8_t **key, size_t *key_len,
                     const uint8_t **value, size_t *value_len);

/* ---- FOREIGN KEY constraints (ffi/src/foreign_keys.rs: catalog, format, locking) -- */

/* A table's keys, recorded so constraints can find the index serving them. */
enum tdb_key_flags {
  TDB_KEY_PRIMARY = 1,
  TDB_KEY_UNIQUE = 2,
  TDB_KEY_UNUSABLE = 4,
  TDB_KEY_FULLTEXT = 8
};
enum tdb_key_part_flags { TDB_PART_NULLABLE = 1, TDB_PART_DESC = 2, TDB_PART_PREFIX = 4 };
struct tdb_key_part_def {
  const char *column;
  const char *type_sig;  /* equal signatures = columns a constraint may pair */
  uint32_t length;       /* the key part's byte length (KEY_PART_INFO::length) */
  uint32_t flags;        /* enum tdb_key_part_flags */
};
struct tdb_key_def {
  uint32_t engine_index; /* 0 = the primary key (rows) */
  uint32_t flags;        /* enum tdb_key_flags */
  const char *name;
  uint32_t n_parts;
  const struct tdb_key_part_def *parts;
};
/* Records (or replaces) the keys of table name; a no-op when unchanged. */
int tdb_table_set_keys(const char *name, const struct tdb_key_def *keys, uint32_t n_keys);
/* TDB_OK if every constraint referencing table name from another table finds an
   index among keys (a new definition of name), else TDB_FK_MALFORMED naming the
   first that does not. */
int tdb_fk_keys_serve(const char *name, const struct tdb_key_def *keys, uint32_t n_keys);

/* A constraint to add (name NULL: generated, <display>_ibfk_<n>). Table names are
   paths as elsewhere (./db/t); on_delete / on_update are enum_fk_option values. */
struct tdb_fk_def {
  const char *name;
  const char *parent;
  uint32_t n_cols;
  const char *const *child_cols;
  const char *const *parent_cols;
  uint32_t on_delete;
  uint32_t on_update;
};
/* Sets the constraints of the just created table child: those of inherit_from
   (the table a copying ALTER TABLE rebuilds; NULL: none) not named in drop, plus
   add. With checks (foreign_key_checks = 1) each needs a parent table; every one
   needs an index starting with its columns on both sides and equal type
   signatures: TDB_FK_MALFORMED otherwise, TDB_DUPLICATE for a name in use. */
int tdb_fk_define(const char *child, const char *display, const char *inherit_from,
                  const char *const *drop, uint32_t n_drop, const struct tdb_fk_def *add,
                  uint32_t n_add, int checks);
/* (tdb_table_rename and tdb_table_drop move / drop a table's constraint entries in
   the catalog's own transaction.) */
/* An in-place RENAME COLUMN of table name: the constraints on it and those
   referencing it follow. */
int tdb_fk_rename_column(const char *name, const char *from, const char *to);

struct tdb_fk_part {
  uint32_t length;
  uint32_t flags; /* enum tdb_key_part_flags */
};
/* One constraint, resolved: child_index / parent_index are UINT32_MAX (and the
   parts NULL) when that side's table or index is missing. */
struct tdb_fk_info {
  const char *name;
  const char *child;
  const char *parent;
  uint32_t n_cols;
  const char *const *child_cols;
  const char *const *parent_cols;
  uint32_t on_delete;
  uint32_t on_update;
  uint32_t child_index;
  uint32_t parent_index;
  const char *parent_key_name;
  const struct tdb_fk_part *child_parts;
  const struct tdb_fk_part *parent_parts;
  /* The id of the parent's family parent_index named when the list was made
     (TDB_FK_FAMILY_BY_POSITION: the parent is missing); pass it to tdb_fk_probe. */
  uint64_t parent_family;
};
typedef struct tdb_fk_list tdb_fk_list;
/* The constraints declared on table name (as_parent = 0) or referencing it (1). */
int tdb_fk_list_open(const char *name, int as_parent, tdb_fk_list **out);
uint32_t tdb_fk_list_count(const tdb_fk_list *list);
/* Valid until tdb_fk_list_free; NULL past the end. */
const struct tdb_fk_info *tdb_fk_list_get(const tdb_fk_list *list, uint32_t i);
void tdb_fk_list_free(tdb_fk_list *list);

/* A check's probe: first, unless lock_mode is TDB_FK_NO_LOCK, locks lock_key as a
   name in index lock_index of table lock_table (enum tdb_lock_mode; the key need not
   exist); then TDB_OK if index `index` of table `table` holds an entry starting with
   prefix in the latest committed state (own writes included), TDB_NOT_FOUND if not
   (also when the table does not exist). lock_family: a tdb_fk_info's parent_family
   (the family locked, and probed when the probe is of the locked index, wherever
   it now is among the table's), or TDB_FK_FAMILY_BY_POSITION (index lock_index).
   TDB_STALE: that family is no longer the table's, or the list was made while an
   ALTER was replacing the table's keys: open the list again and retry. */
#define TDB_FK_NO_LOCK 0xFFFFFFFFu
#define TDB_FK_FAMILY_BY_POSITION 0u
int tdb_fk_probe(tdb_trx *trx, const char *lock_table, uint32_t lock_index, uint64_t lock_family,
                 const uint8_t *lock_key, size_t lock_key_len, uint32_t lock_mode,
                 const char *table, uint32_t index, const uint8_t *prefix, size_t prefix_len);
/* After a child's check got TDB_STALE from tdb_fk_probe: TDB_OK to open the list
   again and retry, else the status to fail the check with (the retries ran for the
   statement's lock wait, lock_wait_ms, or killed != 0). *tries counts the stale
   probes of the check: 0 before its first. */
int tdb_fk_stale_retry(uint64_t *tries, uint64_t lock_wait_ms, int killed);

/* ---- FULLTEXT (ffi/src/fulltext.rs: tokenizer, format, ranking) -------------- */

/* Token sizes (tidesdb_ft_min_token_size / tidesdb_ft_max_token_size) of FULLTEXT
   indexes built from now on (an index keeps those it was built with). */
void tdb_ft_set_min_token_size(uint32_t n);
void tdb_ft_set_max_token_size(uint32_t n);
/* Entries a document adds to FULLTEXT index `index` (CHECK TABLE): one per distinct
   stored word, plus its length where the index keeps lengths; 0 on error. */
uint64_t tdb_ft_document_terms(tdb_trx *trx, tdb_table *table, uint32_t index,
                               const uint8_t *doc, size_t len);
/* Fixes the settings of FULLTEXT index `index`, about to be built (empty), in the
   transaction: stopwords off (enable = 0), InnoDB's default list (words NULL), or the
   given list (words: n_words x (u32 LE length + UTF-8)); the token sizes are the
   current ones. */
int tdb_ft_index_settings(tdb_trx *trx, tdb_table *table, uint32_t index, int enable,
                          const uint8_t *words, size_t words_len);

/* Word i of InnoDB's default stopword list (INFORMATION_SCHEMA): its length, 0
   past the end; *word stays valid. */
size_t tdb_ft_default_stopword(size_t i, const uint8_t **word);
/* Entries of FULLTEXT index `index` that are no postings (CHECK TABLE). */
uint64_t tdb_ft_meta_entries(tdb_trx *trx, tdb_table *table, uint32_t index);

typedef struct tdb_ft_result tdb_ft_result;
/* The shim's reader of a row's document (the format of TDB_OP_FT_* values): 0 with
   *doc / *doc_len set (valid until the next call), 1 if the row is gone, else an
   error. */
typedef int (*tdb_ft_fetch_doc)(void *ctx, const uint8_t *pk, size_t pk_len,
                                const uint8_t **doc, size_t *doc_len);
/* Evaluates a query (UTF-8) on FULLTEXT index `index` in the transaction's view, as
   InnoDB does. flags: 1 = boolean mode, 2 = sorted by relevance (else by primary
   key), 4 = WITH QUERY EXPANSION (natural language mode only),
   TDB_FT_CASE_SENSITIVE = the index's words keep their case (its documents set
   TDB_FT_DOC_CASE_SENSITIVE), TDB_FT_SINGLE_COLUMN = the index has one column,
   TDB_FT_RANKING_BM25 = relevance by Okapi BM25 instead of InnoDB's (same rows).
   total_docs: the table's rows (relevance). fetch/ctx read rows' documents (phrases,
   query expansion). word_order: 128 bytes, the rank of each ASCII character in the
   index's collation, or NULL for byte order: InnoDB reads the words of a prefix term
   (`s*`) in its collation's order, and a row's frequency for the term is that of the
   first of them the row has. A query InnoDB refuses: TDB_INVALID with *syntax_error = 1
   (its parser's message in tdb_last_error()), 2 (parentheses nested too deep) or 3
   (more than 128 words in a phrase); else *syntax_error = 0. */
#define TDB_FT_CASE_SENSITIVE 0x100u
#define TDB_FT_SINGLE_COLUMN 0x200u
#define TDB_FT_RANKING_BM25 0x400u
/* Top bit of a document column's length: the column's words keep their case (its
   collation sorts by code point, as a _bin one). */
#define TDB_FT_DOC_CASE_SENSITIVE 0x80000000u
int tdb_ft_search(tdb_trx *trx, tdb_table *table, uint32_t index, const uint8_t *query,
                  size_t len, uint32_t flags, uint64_t total_docs, const uint8_t *word_order,
                  tdb_ft_fetch_doc fetch, void *ctx, tdb_ft_result **out, int *syntax_error);
/* The next matching row's primary key (valid while the result lives) and relevance;
   TDB_END after the last. */
int tdb_ft_result_next(tdb_ft_result *res, const uint8_t **pk, size_t *pk_len,
                       float *relevance);
void tdb_ft_result_rewind(tdb_ft_result *res);
/* Relevance of the row with this primary key; 0 if it does not match. */
float tdb_ft_result_relevance(const tdb_ft_result *res, const uint8_t *pk, size_t len);
void tdb_ft_result_free(tdb_ft_result *res);
/* The words of table `name`'s FULLTEXT indexes ('db/t' or './db/t'), read at one
   snapshot, in key order then word order: cb once per (index, word) with the number
   of rows holding the word and its occurrences in them; a non-zero return of cb
   stops the walk. TDB_NO_SUCH_TABLE: no such table. */
typedef int (*tdb_ft_word_cb)(void *ctx, const char *key_name, size_t key_name_len,
                              const uint8_t *word, size_t word_len, uint64_t doc_count,
                              uint64_t occurrences);
int tdb_ft_index_words(const char *name, tdb_ft_word_cb cb, void *ctx);
/* 1 if table `name` is a TidesDB table with a FULLTEXT index, else 0. */
int tdb_ft_table_has_index(const char *name);
/* ---- SPATIAL indexes -------------------------------------------------------------
 * A SPATIAL index is a secondary index (its own column family) whose entry key is
 * the 8-byte Hilbert prefix of tdb_spatial_key followed by the primary key, and
 * whose value ends with the entry's MBR (4 doubles, little-endian: xmin, xmax,
 * ymin, ymax, the server's itMBR key image). Format: ffi/src/spatial.rs. */

/* The search modes of the server's HA_READ_MBR_* flags (S: stored MBR, Q: query). */
enum tdb_mbr_mode {
  TDB_MBR_INTERSECT = 0, /* S meets Q */
  TDB_MBR_CONTAIN = 1,   /* Q contains S */
  TDB_MBR_WITHIN = 2,    /* S contains Q */
  TDB_MBR_EQUAL = 3,     /* S equals Q */
  TDB_MBR_DISJOINT = 4   /* every entry (the server filters) */
};

/* The 8-byte key prefix (Hilbert value of the centre) of an entry with this MBR. */
int tdb_spatial_key(const double mbr[4], uint8_t out[8]);
/* Must be called before tdb_apply writes an entry with this MBR into spatial
   index `index`: the index's largest half-extent (which widens searches) grows to
   cover it, persisted in the catalog. */
int tdb_spatial_note(tdb_table *table, uint32_t index, const double mbr[4]);
/* Positions a cursor opened on a spatial index on the first entry (after the key
   `after`, if not NULL) whose stored MBR matches q under mode (enum
   tdb_mbr_mode); tdb_cursor_next then moves to the next match, in key order.
   TDB_END when there is none. Another seek ends the search; tdb_cursor_prev is
   refused during one. */
int tdb_cursor_spatial_seek(tdb_cursor *cursor, uint32_t mode, const double q[4],
                            const uint8_t *after, size_t after_len);
/* How many entries of spatial index `index` match (q, mode) in the transaction's
   view: counted up to cap, extrapolated beyond. UINT64_MAX on error. */
uint64_t tdb_spatial_estimate(tdb_trx *trx, tdb_table *table, uint32_t index, uint32_t mode,
                              const double q[4], uint64_t cap);

/* ------------------------------------------------------ Galera (wsrep), wsrep.rs */

/* Stores the cluster position (a wsrep XID in the shim's xid encoding) with the
   transaction's writes, before tdb_trx_prepare or tdb_trx_commit: durable exactly
   when they are. Nothing is stored for a transaction that wrote nothing here. */
int tdb_trx_write_wsrep_position(tdb_trx *trx, const uint8_t *xid, size_t xid_len);
/* Lists the active transaction of wsrep session thd (bf: an applier or TOI) for
   brute-force aborts; call at each statement start. It is unlisted when it ends. */
int tdb_trx_set_wsrep(tdb_trx *trx, void *thd, int bf);
/* Installs the brute-force abort policy (wsrep.rs): abort(bf_thd, victim_thd)
   returns non-zero if the victim is now aborting. */
typedef int (*tdb_wsrep_abort_fn)(void *bf_thd, void *victim_thd);
int tdb_wsrep_enable(tdb_wsrep_abort_fn abort);
/* The stored position with the highest seqno; TDB_NOT_FOUND if none. */
int tdb_wsrep_checkpoint_get(uint8_t *out, size_t cap, size_t *out_len);
/* Replaces the stored position (state transfer, server's request). */
int tdb_wsrep_checkpoint_set(const uint8_t *xid, size_t xid_len);

/* enum tdb_wsrep_change */
#define TDB_WSREP_INSERT 0
#define TDB_WSREP_UPDATE 1
#define TDB_WSREP_DELETE 2
/* tdb_wsrep_entry.class */
#define TDB_WSREP_PRIMARY 0
#define TDB_WSREP_UNIQUE 1
#define TDB_WSREP_OTHER 2
struct tdb_wsrep_entry {
  uint8_t cls;
  const char *index_name; /* the server's index name ("PRIMARY" for the row) */
  const uint8_t *key;     /* the engine's encoding of the entry's key */
  size_t key_len;
};
/* Receives a certification key's last part (after database and table) and its
   type (enum Wsrep_service_key_type); non-zero stops with an error. */
typedef int (*tdb_wsrep_key_fn)(void *ctx, const uint8_t *key, size_t key_len,
                                uint32_t key_type);
/* The certification keys of one row change: its primary and unique entries and,
   for a table without primary key, the row images (old and/or new, NULL if none). */
int tdb_wsrep_row_keys(uint32_t change, const struct tdb_wsrep_entry *entries,
                       size_t n_entries, const uint8_t *old_image, size_t old_len,
                       const uint8_t *new_image, size_t new_len, tdb_wsrep_key_fn emit,
                       void *ctx);
/* The key of a foreign key's parent row (index `index_name` of the parent, the
   child's values in the parent's key encoding). */
int tdb_wsrep_parent_key(const char *index_name, const uint8_t *key, size_t key_len,
                         tdb_wsrep_key_fn emit, void *ctx);

#ifdef __cplusplus
}
#endif

#endif /* TIDESDB_FFI_H */
