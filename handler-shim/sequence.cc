/*
  SEQUENCE tables (CREATE SEQUENCE ... ENGINE=TidesDB) for ha_tidesdb.

  The server's sequence handler (sql/ha_sequence.cc) wraps ours. A sequence is a
  one-row table without keys (ours: the hidden row id is its primary key): the
  server reads the row when the table is opened (read_initial_values) and
  overwrites it (update_first_row: rnd_init, rnd_next, update_row) when its cache of
  values runs out, on SETVAL and on ALTER SEQUENCE; it binlogs the row itself.

  Such writes must never be rolled back: a NEXTVAL inside a transaction that rolls
  back still consumed its values, and another session's NEXTVAL must never wait for
  that transaction's row lock (HA_CAN_TABLES_WITHOUT_ROLLBACK: "should not lock rows
  and support READ and WRITE UNCOMMITTED"). InnoDB writes a sequence's row without
  undo log and reads it without a read view. Here every read and write of a
  sequence table runs in an engine transaction of the handler's own, not in the
  connection's: a write is committed at once (durable as any commit, per
  tidesdb_sync_mode), a read sees the latest committed row, and nothing of the
  sequence ever enters the connection's transaction (no write, no lock, no
  snapshot). The server serialises the writers of one sequence (SEQUENCE's lock),
  so the row's own lock is only ever held for the instant of the write.
*/
#include "ha_tidesdb.h"

using namespace tidesdb;

tdb_trx *ha_tidesdb::sequence_trx() {
  if (!m_seq_trx) {
    tdb_trx *t = tdb_trx_new();
    /* READ COMMITTED: a fresh snapshot for every use (the transaction is freed
       after each read and write, see sequence_trx_end). */
    if (t && tdb_trx_begin(t, TDB_ISO_READ_COMMITTED)) {
      tdb_trx_free(t);
      t = nullptr;
    }
    if (t) tdb_trx_set_lock_wait_timeout(t, statement_lock_wait_ms(ha_thd()));
    m_seq_trx = t;
  }
  return m_seq_trx;
}

void ha_tidesdb::sequence_trx_end() {
  /* Freed, not kept between statements: an idle transaction would pin its
     snapshot's versions against compaction. It never holds uncommitted writes
     here (sequence_commit ends every write). */
  if (m_seq_trx) {
    tdb_trx_free(m_seq_trx);
    m_seq_trx = nullptr;
  }
}

int ha_tidesdb::sequence_commit(int status) {
  if (!status && m_seq_trx) status = tdb_trx_commit(m_seq_trx);
  sequence_trx_end(); /* rolls back a failed write */
  return status;
}
