/*
  Engine checkpoints for backups (backup.cc): the two system variables and the
  handlerton's backup hooks.
*/
#ifndef TIDESDB_BACKUP_H
#define TIDESDB_BACKUP_H

#include "tidesdb_server.h"

namespace tidesdb {

/* tidesdb_checkpoint and tidesdb_backup_checkpoint, for the plugin's variable array. */
st_mysql_sys_var *checkpoint_sysvar();
st_mysql_sys_var *backup_checkpoint_sysvar();

/* handlerton::prepare_for_backup (BACKUP STAGE START) and ::end_backup (END). */
void prepare_for_backup();
void end_backup();

}  // namespace tidesdb

#endif
