/*
  transport: transportable tables (FLUSH TABLES ... FOR EXPORT, ALTER TABLE ...
  DISCARD / IMPORT TABLESPACE). Translation only: the files, their checks and the
  catalog changes are ffi/src/transport.

  The definition lines describe a table as the server defines it, one line per
  column, per index and for the primary key; the engine writes them into the .cfg
  of an export and refuses an import whose lines differ from the importing table's
  (the first differing line is the error message's detail), so they name what
  decides how rows and index entries are encoded: column order, type, length,
  charset, nullability, storage; index order, kind, parts, their lengths and order.
*/
#ifndef TIDESDB_TRANSPORT_H
#define TIDESDB_TRANSPORT_H

#include "tidesdb_server.h"
#include <string>
#include <vector>

namespace tidesdb {

std::vector<std::string> definition_lines(TABLE *table);

/* True for the external_lock of FLUSH TABLES ... FOR EXPORT. */
bool is_export_lock(THD *thd, int lock_type);

}  // namespace tidesdb

#endif
