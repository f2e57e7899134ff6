/* status: see status.h. */
#include "status.h"
#include "tidesdb_ffi.h"
#include <atomic>
#include <new>

namespace tidesdb {

static std::atomic<ulonglong> shim_counters[SHIM_COUNTERS];

void count_event(Shim_counter which) { shim_counters[which].fetch_add(1, std::memory_order_relaxed); }

/* Names after the "Tidesdb_" prefix, in the order of the values below. */
static const char *const counter_names[] = {
    "rows_read",          "rows_inserted",       "rows_updated",
    "rows_deleted",       "stats_auto_recalcs", "commits",             "rollbacks",
    "lock_waits",         "lock_wait_timeouts",  "deadlocks",          "lock_escalations",
    "write_conflicts",    "block_cache_hits",    "block_cache_misses",
    "block_cache_bytes",  "wal_bytes_written",   "wal_syncs",          "commit_groups",
    "table_bytes_written", "memtable_flushes",   "compactions",
    "write_stalls",       "write_slowdowns",     "table_files",
    "live_bytes",         "memtable_bytes",      "pending_compaction_bytes",
    "table_block_reads",  "table_disk_reads",    "compaction_paced_millis"};
static const size_t N_COUNTERS = array_elements(counter_names);
static const size_t N_ENGINE = sizeof(tdb_engine_counters) / sizeof(uint64_t);
static_assert(N_COUNTERS == SHIM_COUNTERS + N_ENGINE, "one name per counter");

/* What the server reads after show_counters returns: built in its per-call buffer,
   so concurrent SHOW STATUS calls never share it. */
struct Counter_snapshot {
  SHOW_VAR vars[N_COUNTERS + 1];
  ulonglong values[N_COUNTERS];
};
static_assert(sizeof(Counter_snapshot) <= SHOW_VAR_FUNC_BUFF_SIZE, "fits the server's buffer");

static int show_counters(THD *, SHOW_VAR *var, void *buff, struct system_status_var *,
                         enum enum_var_type) {
  Counter_snapshot *s = new (buff) Counter_snapshot;
  for (size_t i = 0; i < SHIM_COUNTERS; i++)
    s->values[i] = shim_counters[i].load(std::memory_order_relaxed);
  tdb_engine_counters c;
  memset(&c, 0, sizeof(c));
  tdb_engine_counters_get(&c); /* zeros when the engine is not open */
  memcpy(&s->values[SHIM_COUNTERS], &c, sizeof(c));
  for (size_t i = 0; i < N_COUNTERS; i++)
    s->vars[i] = {counter_names[i], (char *)&s->values[i], SHOW_ULONGLONG};
  s->vars[N_COUNTERS] = {NullS, NullS, SHOW_LONG};
  var->type = SHOW_ARRAY;
  var->value = (char *)s->vars;
  return 0;
}

SHOW_VAR status_variables[] = {{"Tidesdb", (char *)&show_counters, SHOW_FUNC},
                               {NullS, NullS, SHOW_LONG}};

}  // namespace tidesdb
