/*
  Engine status (enum tdb_status) -> handler error (HA_ERR_*), and the engine's
  private error range, whose texts come from handler::get_error_message().
*/
#ifndef TIDESDB_ERRORS_H
#define TIDESDB_ERRORS_H

#include "tidesdb_server.h"

namespace tidesdb {

/* Private handler errors, above the server's HA_ERR_LAST. */
enum {
  HA_ERR_TIDESDB_FIRST = 600,
  HA_ERR_TIDESDB_CORRUPTION = HA_ERR_TIDESDB_FIRST,
  HA_ERR_TIDESDB_IO = 601,
  HA_ERR_TIDESDB_READ_ONLY = 602,
  HA_ERR_TIDESDB_INTERNAL = 603,
  HA_ERR_TIDESDB_NOT_OPEN = 604,
  HA_ERR_TIDESDB_KEY_UNAVAILABLE = 605,
  HA_ERR_TIDESDB_WSREP_TWO_ENGINES = 606,
  HA_ERR_TIDESDB_LAST = HA_ERR_TIDESDB_WSREP_TWO_ENGINES
};
static_assert(HA_ERR_TIDESDB_FIRST > HA_ERR_LAST, "private errors must not clash");

/* Maps a tdb_status to a HA_ERR_* code; 0 for TDB_OK. When thd is given and the
   engine rolled the whole transaction back (deadlock), tells the server so. */
int to_ha_error(int status, THD *thd);

/* The message of a private error code (NULL for the server's own codes). */
const char *private_error_text(int ha_error);

}  // namespace tidesdb

#endif
