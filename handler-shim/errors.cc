/* errors: see errors.h. */
#include "errors.h"
#include "tidesdb_ffi.h"

namespace tidesdb {

int to_ha_error(int status, THD *thd) {
  switch (status) {
  case TDB_OK: return 0;
  case TDB_NOT_FOUND: return HA_ERR_KEY_NOT_FOUND;
  case TDB_END: return HA_ERR_END_OF_FILE;
  case TDB_DUPLICATE: return HA_ERR_FOUND_DUPP_KEY;
  case TDB_CONFLICT:
    /* First committer wins: the statement's writes clash with a transaction that
       committed after our snapshot. Retrying the transaction is the remedy, which
       is what the server's deadlock error tells the application. */
    if (thd) thd->mark_transaction_to_rollback(true);
    return HA_ERR_LOCK_DEADLOCK;
  case TDB_LOCK_TIMEOUT: return HA_ERR_LOCK_WAIT_TIMEOUT;
  case TDB_DEADLOCK:
    if (thd) thd->mark_transaction_to_rollback(true);
    return HA_ERR_LOCK_DEADLOCK;
  case TDB_NO_SUCH_TABLE: return HA_ERR_NO_SUCH_TABLE;
  case TDB_TABLE_EXISTS: return HA_ERR_TABLE_EXIST;
  case TDB_CORRUPTION: return HA_ERR_TIDESDB_CORRUPTION;
  case TDB_IO_ERROR: return HA_ERR_TIDESDB_IO;
  /* The server reports it as ER_DISK_FULL ("Disk got full writing 'db.table'"). */
  case TDB_DISK_FULL: return HA_ERR_DISK_FULL;
  case TDB_READ_ONLY: return HA_ERR_TIDESDB_READ_ONLY;
  case TDB_NOT_OPEN: return HA_ERR_TIDESDB_NOT_OPEN;
  case TDB_ABORTED: return HA_ERR_ABORTED_BY_USER;
  case TDB_KEY_UNAVAILABLE: return HA_ERR_TIDESDB_KEY_UNAVAILABLE;
  case TDB_DISCARDED: return HA_ERR_TABLESPACE_MISSING;
  case TDB_NOT_DISCARDED: return HA_ERR_TABLESPACE_EXISTS;
  case TDB_SCHEMA_MISMATCH: return HA_ERR_TABLE_DEF_CHANGED;
  /* A FOREIGN KEY check's probe (fk_check_child retries it while
     tdb_fk_stale_retry says so). */
  case TDB_STALE: return HA_ERR_LOCK_WAIT_TIMEOUT;
  case TDB_INVALID:
  case TDB_INTERNAL:
  default: return HA_ERR_TIDESDB_INTERNAL;
  }
}

const char *private_error_text(int ha_error) {
  switch (ha_error) {
  case HA_ERR_TIDESDB_CORRUPTION: return "TidesDB: data file corruption";
  case HA_ERR_TIDESDB_IO: return "TidesDB: I/O error";
  case HA_ERR_TIDESDB_READ_ONLY:
    /* why (a failed sync, tidesdb_force_recovery) follows in the engine's message */
    return "TidesDB: writes are refused";
  case HA_ERR_TIDESDB_INTERNAL: return "TidesDB: internal error";
  case HA_ERR_TIDESDB_NOT_OPEN: return "TidesDB: the engine is not open";
  case HA_ERR_TIDESDB_KEY_UNAVAILABLE:
    /* which table and key follow in the engine's message */
    return "TidesDB: encryption key not available";
  case HA_ERR_TIDESDB_WSREP_TWO_ENGINES:
    return "TidesDB: a Galera transaction cannot write TidesDB tables after writing InnoDB "
           "tables (the server would certify it twice, which aborts the node); commit the "
           "InnoDB changes first";
  default: return NULL;
  }
}

}  // namespace tidesdb
