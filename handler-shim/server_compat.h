/*
  server_compat: every difference between the handler APIs of the servers this
  plugin builds for (MariaDB 10.11 and 11.8), in one place. The rest of the shim is
  written once, in the terms defined here. Which server it is comes from the headers
  the build compiles against (MYSQL_VERSION_ID of their mysql_version.h; build.rs
  checks that they are the installed server's exact version).

  1. handlerton callbacks. 10.11 passes the handlerton as the first argument of every
     callback; 11.8 dropped it from some (commit, rollback, savepoints,
     close_connection, start_consistent_snapshot, ...). The engine's callbacks take no
     handlerton (the engine has exactly one, tidesdb_hton) and are installed with
     TIDESDB_HTON_SET, which adapts each to the slot's own type as the headers declare
     it: no list of which callback changed in which version to keep up to date.

  2. The optimizer's cost model. 10.11 asks a handler for costs in "disk seeks"
     (double scan_time(), double read_time(index, ranges, rows)). 11.0 replaced that
     model: costs in milliseconds as IO_AND_CPU_COST (scan_time, rnd_pos_time,
     keyread_time(.., blocks), key_scan_time(.., rows)), with per-engine constants in
     OPTIMIZER_COSTS (information_schema.OPTIMIZER_COSTS) that the engine sets in
     handlerton::update_optimizer_costs. The engine's formulas for 10.11 stay in
     ha_tidesdb.cc (scan_cost() / read_cost()); TIDESDB_HANDLER_COST_API declares the
     overrides of the server in use, TIDESDB_INIT_OPTIMIZER_COSTS sets the 11.x
     engine constants.

  3. Keys and names. 11.x says a key is SPATIAL or FULLTEXT by its algorithm
     (HA_KEY_ALG_RTREE / HA_KEY_ALG_FULLTEXT; the HA_SPATIAL and HA_FULLTEXT flags are
     gone), compares identifiers with CHARSET_INFO::streq (my_strcasecmp is gone) and
     names ALTER's dropped objects with Lex_ident_column instead of const char *:
     key_is_spatial(), key_is_fulltext(), ident_eq() and c_str() say each once.
     SHOW INDEX's Index_type: 11.x's handler::index_type names a key by the
     algorithm the table was created with (USING HASH shows HASH, VECTOR keys
     VECTOR, as InnoDB on 11.x), so the engine keeps the server's; 10.11's has no
     default, so there the engine names its own (TIDESDB_INDEX_TYPE_API).
     A clustered primary key: 11.x's handler.h asks that its index_flags have
     HA_CLUSTERED_INDEX and not HA_KEYREAD_ONLY (as InnoDB's): the optimizer then
     scans the table, not the key "index-only", where 10.11 reads both as the same
     (CLUSTERED_PK_FLAGS).
     rec_per_key: InnoDB 10.11 gives the optimizer half its measured rows per value
     ("pretend index selectivity is 2 times better", ha_innobase::info_low); InnoDB
     11.x gives the measured value (SHOW INDEX's cardinality is the distinct count),
     its cost model weighing index reads itself (REC_PER_KEY_DIVISOR).
*/
#ifndef TIDESDB_SERVER_COMPAT_H
#define TIDESDB_SERVER_COMPAT_H

#include <mysql_version.h>

#if MYSQL_VERSION_ID >= 110000
#define TIDESDB_COST_MODEL_11 1
#else
#define TIDESDB_COST_MODEL_11 0
#endif

namespace tidesdb_compat {

/* A handlerton slot of type R (*)(handlerton *, Args...) gets a function that drops
   the handlerton and calls Fn(Args...); a slot without it gets Fn's arguments as they
   are. (The first specialization is the more specialized one, so it wins whenever
   the slot's first parameter is a handlerton *.) */
template <auto Fn, typename Slot>
struct hton_callback;

template <auto Fn, typename R, typename... Args>
struct hton_callback<Fn, R (*)(Args...)> {
  static R call(Args... args) { return Fn(args...); }
};

template <auto Fn, typename R, typename... Args>
struct hton_callback<Fn, R (*)(handlerton *, Args...)> {
  static R call(handlerton *, Args... args) { return Fn(args...); }
};

#ifndef TIDESDB_COMPAT_ADAPTER_ONLY /* (the adapter's unit test has no server types) */
/* index_flags of a primary key that holds the whole row (see 3. above). */
#if MYSQL_VERSION_ID >= 110000
static const unsigned long CLUSTERED_PK_FLAGS = HA_CLUSTERED_INDEX;
#else
static const unsigned long CLUSTERED_PK_FLAGS = HA_KEYREAD_ONLY | HA_CLUSTERED_INDEX;
#endif
/* index_flags of a primary key with a prefix (or BLOB) part (see 3. above): the row
   holds every column, but an index-only read of another key cannot restore such a
   part. 11.x costs a range of a key without HA_CLUSTERED_INDEX as index reads plus
   row reads, so there the key is clustered, as InnoDB's, and an index-only read
   that must give such a column reads the row (ha_tidesdb.cc, fetch_entry_row).
   10.11's costs are the engine's own either way: not clustered, so index merge never
   filters by the key's ranges. */
#if MYSQL_VERSION_ID >= 110000
static const unsigned long PREFIX_PK_FLAGS = HA_CLUSTERED_INDEX;
#else
static const unsigned long PREFIX_PK_FLAGS = HA_KEYREAD_ONLY;
#endif
/* What the measured rows per key value are divided by for the optimizer (see 3.). */
#if MYSQL_VERSION_ID >= 110000
static const unsigned long REC_PER_KEY_DIVISOR = 1;
#else
static const unsigned long REC_PER_KEY_DIVISOR = 2;
#endif
/* A name as a C string: 10.11's const char * or 11.x's LEX_CSTRING-based idents. */
inline const char *c_str(const char *s) { return s; }
inline const char *c_str(const LEX_CSTRING &s) { return s.str; }

#if MYSQL_VERSION_ID >= 110000
inline bool key_is_spatial(const KEY *key) { return key->algorithm == HA_KEY_ALG_RTREE; }
inline bool key_is_fulltext(const KEY *key) { return key->algorithm == HA_KEY_ALG_FULLTEXT; }
/* Identifiers (columns, keys) are equal as the server compares them. */
inline bool ident_eq(const char *a, const char *b) {
  return system_charset_info->streq(LEX_CSTRING{a, strlen(a)}, LEX_CSTRING{b, strlen(b)});
}
#else
inline bool key_is_spatial(const KEY *key) { return key->flags & HA_SPATIAL; }
inline bool key_is_fulltext(const KEY *key) { return key->flags & HA_FULLTEXT; }
inline bool ident_eq(const char *a, const char *b) {
  return !my_strcasecmp(system_charset_info, a, b);
}
#endif
#endif

}  // namespace tidesdb_compat

#if MYSQL_VERSION_ID >= 110000
#define TIDESDB_INDEX_TYPE_API
#else
/* Keys are ordered (range scans, ORDER BY both ways): reported as BTREE, like
   InnoDB 10.11 and MyRocks, so tools that look for ordered indexes find them. */
#define TIDESDB_INDEX_TYPE_API                                              \
  const char *index_type(uint idx) override {                               \
    if (!table_share || idx >= table_share->keys) return "BTREE";           \
    const KEY *key = &table_share->key_info[idx];                           \
    return tidesdb_compat::key_is_spatial(key)    ? "SPATIAL"               \
           : tidesdb_compat::key_is_fulltext(key) ? "FULLTEXT"              \
                                                  : "BTREE";                \
  }
#endif

/* h->slot = fn, fn written without the handlerton argument. */
#define TIDESDB_HTON_SET(h, slot, fn) \
  ((h)->slot = tidesdb_compat::hton_callback<fn, decltype((h)->slot)>::call)

#if TIDESDB_COST_MODEL_11
/* 11.x: the server's own formulas work from the statistics info() reports
   (data_file_length, index_file_length, block_size, rec_per_key, as InnoDB fills
   them); the engine's constants are InnoDB's (innobase_update_optimizer_costs), so
   that the optimizer weighs a TidesDB table as it weighs the same InnoDB table.
   The rows' size is counted in whole pages (cost_model.h, as 10.11's scan_cost):
   InnoDB's data_file_length is its clustered index's pages, at least one, so a
   small table costs a page to scan and each row fetched through a secondary key
   costs up to a page, where the raw bytes would make those lookups look free. */
#include "cost_model.h"
#define TIDESDB_HANDLER_COST_API                                            \
  ulonglong row_blocks() override {                                         \
    return tidesdb_compat::page_bytes(stats.data_file_length) / IO_SIZE;    \
  }                                                                         \
  IO_AND_CPU_COST scan_time() override {                                    \
    ulonglong bytes = tidesdb_compat::page_bytes(stats.data_file_length);   \
    return {(double)(bytes / IO_SIZE),                                      \
            (double)(bytes / tidesdb::cost::PAGE_BYTES) * INDEX_BLOCK_COPY_COST}; \
  }
#define TIDESDB_INIT_OPTIMIZER_COSTS(h) \
  ((h)->update_optimizer_costs = tidesdb_compat::innodb_optimizer_costs)
namespace tidesdb_compat {
/* The bytes of the pages the rows fill (at least one page). */
inline ulonglong page_bytes(ulonglong data_bytes) {
  return (ulonglong)tidesdb::cost::table_pages(data_bytes) * tidesdb::cost::PAGE_BYTES;
}
inline void innodb_optimizer_costs(OPTIMIZER_COSTS *costs) {
  costs->row_next_find_cost = 0.00007013;
  costs->row_lookup_cost = 0.00076597;
  costs->key_next_find_cost = 0.00009900;
  costs->key_lookup_cost = 0.00079112;
  costs->row_copy_cost = 0.00006087;
}
}  // namespace tidesdb_compat
#else
/* 10.11: the engine's own formulas (ha_tidesdb.cc), in disk seeks. */
#define TIDESDB_HANDLER_COST_API                                         \
  double scan_time() override { return scan_cost(); }                    \
  double read_time(uint index, uint ranges, ha_rows rows) override {     \
    return read_cost(index, ranges, rows);                               \
  }
#define TIDESDB_INIT_OPTIMIZER_COSTS(h) ((void)(h))
#endif

#endif
