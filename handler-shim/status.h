/*
  Status variables (SHOW GLOBAL STATUS LIKE 'tidesdb%'): the handler's row counters,
  counted here where rows cross the handler interface, and the engine's counters
  (tdb_engine_counters).
*/
#ifndef TIDESDB_STATUS_H
#define TIDESDB_STATUS_H

#include "tidesdb_server.h"

namespace tidesdb {

enum Row_counter { ROWS_READ, ROWS_INSERTED, ROWS_UPDATED, ROWS_DELETED, ROW_COUNTERS };

/* One more row read / inserted / updated / deleted (any connection, any table). */
void count_row(Row_counter which);

/* The plugin's status variable array (maria_declare_plugin). */
extern SHOW_VAR status_variables[];

}  // namespace tidesdb

#endif
