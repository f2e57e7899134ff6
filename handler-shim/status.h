/*
  Status variables (SHOW GLOBAL STATUS LIKE 'tidesdb%'): the handler's counters
  (rows crossing the handler interface, automatic statistics recalculations),
  counted here, and the engine's counters (tdb_engine_counters_get).
*/
#ifndef TIDESDB_STATUS_H
#define TIDESDB_STATUS_H

#include "tidesdb_server.h"

namespace tidesdb {

enum Shim_counter {
  ROWS_READ,
  ROWS_INSERTED,
  ROWS_UPDATED,
  ROWS_DELETED,
  STATS_AUTO_RECALCS,
  SHIM_COUNTERS
};

/* One more row read / inserted / updated / deleted, or statistics recalculation
   (any connection, any table). */
void count_event(Shim_counter which);

/* The plugin's status variable array (maria_declare_plugin). */
extern SHOW_VAR status_variables[];

}  // namespace tidesdb

#endif
