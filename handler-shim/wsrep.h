/*
  wsrep: the shim's side of Galera replication. Which keys certify a row change,
  and the durable cluster position, are the engine's decisions (ffi/src/wsrep.rs);
  here they become the server's wsrep_key (database, table, key) and the
  handlerton's checkpoint and abort callbacks.
*/
#ifndef TIDESDB_WSREP_H
#define TIDESDB_WSREP_H

#include "tidesdb_server.h"
#include "tidesdb_ffi.h"
#include <string>

namespace tidesdb {

/* True if a row change of `table` by thd's statement must give certification
   keys: wsrep is on for a local (not applying) transaction of a regular table. */
bool wsrep_certifies(THD *thd, TABLE *table);

/* Appends the key of a foreign key's parent row (index index_name of table
   parent_path, the child's values in its encoding) to thd's write set.
   0 or HA_ERR_INTERNAL_ERROR (as InnoDB). */
int wsrep_append_parent_key(THD *thd, const char *parent_path, const char *index_name,
                            const std::string &key);

/* If thd's transaction is a replicated one (its XID a wsrep XID), stores that
   position with the transaction's writes (before prepare or commit). */
int wsrep_store_position(THD *thd, tdb_trx *trx);

/* Lists thd's engine transaction for brute-force aborts (statement start). */
void wsrep_note_statement(THD *thd, tdb_trx *trx);

/* The handlerton's Galera members (HTON_WSREP_REPLICATION, checkpoint, abort). */
void wsrep_init_handlerton(handlerton *hton);

}  // namespace tidesdb

/* The engine's encoding of an XID (tidesdb_plugin.cc). */
std::string xid_bytes(const XID &xid);
bool xid_from_bytes(const uint8_t *p, size_t len, XID *xid);

#endif
