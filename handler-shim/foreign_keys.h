/*
  foreign_keys: FOREIGN KEY constraints, the shim's side. The constraint catalog,
  its format, the resolution of constraints to indexes and the locking probes are
  the engine's (ffi/src/foreign_keys.rs); here the server's definitions become
  tdb_fk_def / tdb_key_def, the engine's lists become FOREIGN_KEY_INFO and
  SHOW CREATE TABLE text, and a row's referenced values become key bytes.
*/
#ifndef TIDESDB_FOREIGN_KEYS_H
#define TIDESDB_FOREIGN_KEYS_H

#include "tidesdb_server.h"
#include "tidesdb_ffi.h"

namespace tidesdb {

/* Records the keys of table `name` (form: its definition) in the engine, so that
   constraints on either side can find the index serving them. */
int fk_register_keys(const char *name, TABLE *form);
/* Whether every constraint referencing table name (from another table) finds an
   index among the keys of form, a new definition of it. */
bool fk_keys_serve_children(const char *name, TABLE *form);

/* CREATE TABLE / copying ALTER TABLE: before the table is created, refuses the
   constraints of the statement the engine does not enforce (my_error given). */
int fk_refuse_unsupported(THD *thd);

/* After table `name` was created: records its constraints (a copying ALTER keeps
   the rebuilt table's, minus DROP FOREIGN KEY, plus ADD). in_place: an in-place
   ALTER of `name` itself, which keeps its own constraints likewise. Returns a
   HA_ERR_* code with the warning InnoDB gives, or 0. */
int fk_define(THD *thd, const char *name, bool in_place = false);

/* DROP TABLE `name`: HA_ERR_ROW_IS_REFERENCED if another table's constraint
   references it and foreign_key_checks is on (as InnoDB; DROP DATABASE may drop a
   parent whose children are in the same database). */
int fk_check_drop(THD *thd, const char *name);

/* An engine table name ("./db/t" or "db/t") -> database and table names as the
   user writes them. */
void fk_split_path(const char *path, std::string *db, std::string *table);

}  // namespace tidesdb

#endif
