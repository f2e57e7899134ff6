/*
  backup: engine checkpoints for backups, through two system variables and the
  handlerton's backup hooks (the checkpoint itself: tidesdb-core, Db::checkpoint).

  SET GLOBAL tidesdb_checkpoint = '/abs/dir'
      A checkpoint now, at the engine's own commit point (TidesDB tables only).
  SET GLOBAL tidesdb_backup_checkpoint = '/abs/dir'
      Arms a checkpoint for the next BACKUP STAGE sequence that starts after it
      (mariadb-backup's). It is taken in the handlerton's end_backup hook, which the
      server calls at BACKUP STAGE END before it releases the backup lock: if that
      backup reached BLOCK_COMMIT, no commit can happen in any engine at that moment,
      so the checkpoint is at the same commit point as the InnoDB/Aria image and the
      binlog position mariadb-backup recorded. The server calls no engine hook at
      BLOCK_COMMIT itself (sql/backup.cc: prepare_for_backup at START, end_backup at
      END). The CHECKPOINT file gets the binlog file, position and gtid_binlog_pos of
      that point, so tidesdb-backup can check both images name the same point. A
      backup that ended before BLOCK_COMMIT (aborted) takes none. One-shot; '' disarms.

  Privileges, as the server asks for the same acts: RELOAD (BACKUP STAGE's) for
  either; a directory outside the data directory also needs FILE and must pass
  secure_file_priv (as SELECT ... INTO OUTFILE). SET GLOBAL itself needs SUPER.
*/
#include "backup.h"

#include <mutex>
#include <string>

#include "errors.h"
#include "ha_tidesdb.h"
#include "sql_acl.h"
#include "log.h"
#include "sql_repl.h"

/* Exported by mariadbd; not declared in the headers the shim includes. */
bool is_secure_file_path(char *path);

namespace tidesdb {

namespace {

std::mutex backup_mutex;
/* Set by SET GLOBAL tidesdb_backup_checkpoint; taken by the next BACKUP STAGE START. */
std::string armed_path;
/* The running backup's destination (from armed_path at its START). */
std::string bound_path;

char *sysvar_checkpoint = nullptr;
char *sysvar_backup_checkpoint = nullptr;

/* The value being set (thd memory), or nullptr for NULL. */
const char *value_of(THD *thd, st_mysql_value *value) {
  char buf[STRING_BUFFER_USUAL_SIZE];
  int len = sizeof(buf);
  const char *s = value->val_str(value, buf, &len);
  return s ? thd_strmake(thd, s, len) : nullptr;
}

/* Privileges and path rules (file comment); false with the error set. */
bool allowed_destination(THD *thd, const char *path) {
  if (check_global_access(thd, RELOAD_ACL)) return false;
  if (tdb_checkpoint_check_path(path)) {
    my_printf_error(ER_WRONG_ARGUMENTS, "TidesDB: %s", MYF(0), tdb_last_error());
    return false;
  }
  if (tdb_checkpoint_in_dir(path, mysql_real_data_home) == 1) return true;
  if (check_global_access(thd, FILE_ACL)) return false;
  if (!is_secure_file_path(const_cast<char *>(path))) {
    my_error(ER_OPTION_PREVENTS_STATEMENT, MYF(0), "--secure-file-priv");
    return false;
  }
  return true;
}

/* The server's commit point, for the CHECKPOINT file: binlog file, position, GTID. */
std::string commit_point_note() {
  std::string note;
  if (mysql_bin_log.is_open()) {
    LOG_INFO li;
    if (!mysql_bin_log.get_current_log(&li)) {
      note += "binlog_file " + std::string(li.log_file_name + dirname_length(li.log_file_name)) +
              "\nbinlog_position " + std::to_string((unsigned long long)li.pos) + "\n";
    }
  }
  String gtid;
  if (!rpl_append_gtid_state(&gtid, true))
    note += "gtid_binlog_pos " + std::string(gtid.ptr(), gtid.length()) + "\n";
  return note;
}

int check_checkpoint(MYSQL_THD thd, st_mysql_sys_var *, void *save, st_mysql_value *value) {
  const char *path = value_of(thd, value);
  *static_cast<const char **>(save) = path;
  if (!path || !*path) {
    my_printf_error(ER_WRONG_ARGUMENTS, "TidesDB: tidesdb_checkpoint needs a directory", MYF(0));
    return 1;
  }
  if (!allowed_destination(thd, path)) return 1;
  uint64_t seq = 0;
  std::string note = "origin SET GLOBAL tidesdb_checkpoint\n";
  if (int st = tdb_engine_checkpoint(path, note.c_str(), &seq)) {
    my_error(ER_GET_ERRMSG, MYF(0), st, tdb_last_error(), "TidesDB");
    return 1;
  }
  sql_print_information("TidesDB: checkpoint of sequence %llu written to %s",
                        (unsigned long long)seq, path);
  return 0;
}

/* The checkpoint is the check's work; the variable keeps no value (as MyRocks'
   rocksdb_create_checkpoint), so it is no state to restore or replicate. */
void update_checkpoint(MYSQL_THD, st_mysql_sys_var *, void *, const void *) {}

int check_backup_checkpoint(MYSQL_THD thd, st_mysql_sys_var *, void *save,
                            st_mysql_value *value) {
  const char *path = value_of(thd, value);
  *static_cast<const char **>(save) = path;
  if (!path || !*path) {
    if (check_global_access(thd, RELOAD_ACL)) return 1;
    std::lock_guard<std::mutex> g(backup_mutex);
    armed_path.clear();
    return 0;
  }
  if (!allowed_destination(thd, path)) return 1;
  std::lock_guard<std::mutex> g(backup_mutex);
  if (!armed_path.empty() || !bound_path.empty()) {
    my_printf_error(ER_LOCK_OR_ACTIVE_TRANSACTION,
                    "TidesDB: a backup checkpoint is already armed for %s (another backup "
                    "running? if none is, SET GLOBAL tidesdb_backup_checkpoint='')",
                    MYF(0), (armed_path.empty() ? bound_path : armed_path).c_str());
    return 1;
  }
  armed_path = path;
  return 0;
}

}  // namespace

static MYSQL_SYSVAR_STR(checkpoint, sysvar_checkpoint, PLUGIN_VAR_MEMALLOC | PLUGIN_VAR_NOCMDOPT,
                        "Set to a new absolute directory: writes a checkpoint of the engine "
                        "there (hard links of its immutable files, the log up to the commit "
                        "point). Holds no value",
                        check_checkpoint, update_checkpoint, "");

static MYSQL_SYSVAR_STR(backup_checkpoint, sysvar_backup_checkpoint,
                        PLUGIN_VAR_MEMALLOC | PLUGIN_VAR_NOCMDOPT,
                        "Set to a new absolute directory: the next BACKUP STAGE sequence "
                        "(mariadb-backup) writes a checkpoint there at BACKUP STAGE END while "
                        "commits are still blocked; one-shot, '' disarms (tidesdb-backup)",
                        check_backup_checkpoint, NULL, "");

st_mysql_sys_var *checkpoint_sysvar() { return MYSQL_SYSVAR(checkpoint); }
st_mysql_sys_var *backup_checkpoint_sysvar() { return MYSQL_SYSVAR(backup_checkpoint); }

void prepare_for_backup() {
  std::lock_guard<std::mutex> g(backup_mutex);
  bound_path.swap(armed_path);
  armed_path.clear();
}

void end_backup() {
  std::string path;
  {
    std::lock_guard<std::mutex> g(backup_mutex);
    path.swap(bound_path);
  }
  if (path.empty()) return;
  THD *thd = current_thd;
  /* The backup lock at BLOCK_COMMIT strength, still held by this thread. */
  bool commits_blocked =
      thd && thd->mdl_context.is_lock_owner(MDL_key::BACKUP, "", "", MDL_BACKUP_WAIT_COMMIT);
  if (!commits_blocked) {
    sql_print_warning("TidesDB: the backup ended before BACKUP STAGE BLOCK_COMMIT: no "
                      "checkpoint written to %s",
                      path.c_str());
    return;
  }
  std::string note = "origin BACKUP STAGE END\n" + commit_point_note();
  uint64_t seq = 0;
  if (int st = tdb_engine_checkpoint(path.c_str(), note.c_str(), &seq)) {
    sql_print_error("TidesDB: backup checkpoint to %s failed: %s (status %d)", path.c_str(),
                    tdb_last_error(), st);
    return;
  }
  sql_print_information("TidesDB: backup checkpoint of sequence %llu written to %s",
                        (unsigned long long)seq, path.c_str());
}

}  // namespace tidesdb
