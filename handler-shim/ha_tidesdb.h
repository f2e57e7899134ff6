/*
  ha_tidesdb: the MariaDB handler of the TidesDB engine.

  This class only translates. Rows and keys become bytes here (row_codec,
  key_codec); everything that stores, orders, versions or locks them lives in the
  Rust engine behind tidesdb_ffi.h. One handler object exists per open table
  instance; the transaction it works in belongs to the connection (THD) and is
  found through tidesdb::get_trx(), never kept past a statement.
*/
#ifndef HA_TIDESDB_H
#define HA_TIDESDB_H

#include "tidesdb_server.h"
#include "tidesdb_ffi.h"
#include "external_values.h"
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include "fulltext.h"
#include <mutex>
#include <string>
#include <vector>

namespace tidesdb {
/* True if an index entry carries the whole value of key part kp (see the Format in
   ha_tidesdb.cc). */
bool part_is_covered(const KEY_PART_INFO *kp);
/* The connection's transaction; created on first use when create is true. */
tdb_trx *get_trx(THD *thd, bool create);
/* Starts (if needed) the connection's transaction and its current statement, and
   registers the engine with the server's transaction coordinator. */
int begin_statement(THD *thd, tdb_trx **out);
/* Milliseconds a row lock wait of the statement may last: tidesdb_lock_wait_timeout,
   or less when the statement sets lock_wait_timeout (NOWAIT, WAIT n, SET STATEMENT),
   as those set innodb_lock_wait_timeout for InnoDB. */
uint64_t statement_lock_wait_ms(THD *thd);
/* Paces an online build to tidesdb_online_alter_max_rows_per_second (read when the
   build starts). */
class Build_pacer {
 public:
  explicit Build_pacer(THD *thd);
  /* Waits, when the build is ahead of the rate after rows_done rows, until it is
     not; false (at once) when the statement is killed. */
  bool pace(ha_rows rows_done);

 private:
  THD *m_thd;
  uint64_t m_rows_per_second;
  std::chrono::steady_clock::time_point m_start;
};
/* tidesdb_stats_auto_recalc */
bool stats_auto_recalc();
/* The fields an entry of secondary key keynr of table carries (see the Format in
   ha_tidesdb.cc). */
void covered_fields(TABLE *table, uint keynr, bool hidden_pk, std::vector<Field *> *out);
/* An op writing (put) or removing (delete) `key` in engine index `index`, with its
   lock taken (lock = 1); unique_len as tdb_op says. The strings must outlive it. */
tdb_op put_op(uint32_t index, const std::string &key, const std::string &value,
              size_t unique_len);
tdb_op delete_op(uint32_t index, const std::string &key);
}  // namespace tidesdb

/* One index an online in-place ADD INDEX builds (inplace_alter.cc), as every
   handler of the table can use it: the new definition's KEY and key parts (a
   handler points each part at the field of its own TABLE with the same fieldnr),
   the field indexes of the columns its entries carry, and its build slot. */
struct Tidesdb_online_index {
  KEY key;
  std::vector<KEY_PART_INFO> parts;
  std::vector<uint> covered;
  uint32_t slot;
};
typedef std::vector<Tidesdb_online_index> Tidesdb_online_build;

/* Per-table state shared by all handlers of one TABLE_SHARE: the server's table
   lock structure. */
class Tidesdb_share : public Handler_share {
public:
  THR_LOCK lock;
  /* The last exact row count of a small table (see ha_tidesdb::info) and the
     engine's entry estimate it was taken at: unchanged estimate, unchanged table. */
  std::mutex count_mutex;
  uint64_t count_stamp = UINT64_MAX;
  uint64_t count_seq = UINT64_MAX; /* the engine's committed sequence at the count */
  ha_rows count_rows = 0;
  /* Index cardinality measured by ANALYZE TABLE: rec_per_key[key][part], empty
     until then. */
  std::vector<std::vector<ulong>> rec_per_key;
  bool stats_loaded = false; /* rec_per_key was read from the catalog or measured */
  /* Automatic recalculation (tidesdb_stats_auto_recalc): rows changed since the
     statistics were measured (or loaded), and the row count they were measured at.
     In memory only, as InnoDB's modification counter. */
  std::atomic<uint64_t> rows_changed{0};
  std::atomic<uint64_t> stats_rows{0};
  std::atomic<bool> stats_measured{false}; /* rec_per_key holds measured values */
  std::atomic<bool> recalculating{false};
  /* steady_clock milliseconds of the last measurement (auto recalc's interval). */
  std::atomic<uint64_t> stats_measured_ms{0};
  /* Not measured yet: rows_changed when the table was last seen empty. */
  std::atomic<uint64_t> stats_probed{UINT64_MAX};
  /* Bumped whenever rec_per_key changes, so each handler's TABLE (the server
     keeps several per table) takes the new values at its next statement. */
  std::atomic<uint64_t> stats_version{0};
  /* When a row of the table last changed (SHOW TABLE STATUS Update_time): in
     memory only, NULL after a restart until the next change, as InnoDB's. */
  std::atomic<time_t> update_time{0};
  /* The engine dropped the saved statistics (TRUNCATE, in-place ALTER): none
     until measured again at the next use (tidesdb_stats_auto_recalc). */
  void forget_statistics() {
    std::lock_guard<std::mutex> guard(count_mutex);
    rec_per_key.clear();
    stats_measured = false;
    stats_probed = UINT64_MAX;
    rows_changed = 0;
    stats_version++;
  }
  /* The indexes an online in-place ADD INDEX is building (inplace_alter.cc), or
     null: while set, every row change of the table also maintains them. */
  std::mutex online_mutex;
  std::shared_ptr<const Tidesdb_online_build> online;
  std::atomic<bool> online_active{false}; /* online is set (checked without the mutex) */
  Tidesdb_share() { thr_lock_init(&lock); }
  ~Tidesdb_share() override { thr_lock_delete(&lock); }
};

class ha_tidesdb final : public handler {
public:
  ha_tidesdb(handlerton *hton, TABLE_SHARE *share);
  ~ha_tidesdb() override;

  /* ---- capabilities ---- */
  /* SHOW INDEX's Index_type (see server_compat.h). */
  TIDESDB_INDEX_TYPE_API
  ulonglong table_flags() const override;
  bool unique_keys_reordered() const;
  /* SHOW TABLE STATUS's Row_format. One format is stored whatever ROW_FORMAT says;
     it is named as InnoDB names its own: the ROW_FORMAT asked for, else Dynamic. */
  enum row_type get_row_type() const override;
  ulong index_flags(uint idx, uint part, bool all_parts) const override;
  uint max_supported_record_length() const override { return HA_MAX_REC_LENGTH; }
  uint max_supported_keys() const override { return MAX_INDEXES; }
  uint max_supported_key_parts() const override { return MAX_REF_PARTS; }
  /* Any index may be scanned whole for an ORDER BY / GROUP BY without LIMIT
     (the server otherwise sorts all rows unless an index covers the query), as
     InnoDB tells it: reading the primary key (or a secondary key's entries and
     then their rows) in order is no dearer than scanning the rows, and streams. */
  const key_map *keys_to_use_for_scanning() override { return &key_map_full; }
  uint max_supported_key_length() const override { return 3072; }
  uint max_supported_key_part_length() const override { return 3072; }
  uint8 table_cache_type() override { return HA_CACHE_TBL_NOCACHE; }
  bool get_error_message(int error, String *buf) override;

  /* ---- DDL ---- */
  int create(const char *name, TABLE *form, HA_CREATE_INFO *info) override;
  int delete_table(const char *name) override;
  int rename_table(const char *from, const char *to) override;
  int truncate() override;
  int delete_all_rows() override { return HA_ERR_WRONG_COMMAND; }
  void update_create_info(HA_CREATE_INFO *info) override;

  /* ---- in-place ALTER TABLE (inplace_alter.cc) ---- */
  bool can_convert_nocopy(const Field &field, const Column_definition &new_type) const override;
  enum_alter_inplace_result check_if_supported_inplace_alter(
      TABLE *altered_table, Alter_inplace_info *ha_alter_info) override;
  bool prepare_inplace_alter_table(TABLE *altered_table,
                                   Alter_inplace_info *ha_alter_info) override;
  bool inplace_alter_table(TABLE *altered_table, Alter_inplace_info *ha_alter_info) override;
  bool commit_inplace_alter_table(TABLE *altered_table, Alter_inplace_info *ha_alter_info,
                                  bool commit) override;
  bool commit_rebuild_group(TABLE *altered_table, Alter_inplace_info *ha_alter_info);
  bool after_rebuild(TABLE *altered_table);
  /* The engine's definition version (tdb_table_version): kept by the server's DDL
     log across an in-place ALTER, so that after a crash tidesdb_check_version tells
     whether the engine committed it. */
  ulonglong table_version() const override { return m_tbl ? tdb_table_version(m_tbl) : 0; }

  /* ---- open / lock ---- */
  int open(const char *name, int mode, uint test_if_locked) override;
  int close() override;
  int external_lock(THD *thd, int lock_type) override;
  /* ALTER TABLE ... DISCARD / IMPORT TABLESPACE (transport.h) */
  int discard_or_import_tablespace(my_bool discard) override;
  int start_stmt(THD *thd, thr_lock_type lock_type) override;
  THR_LOCK_DATA **store_lock(THD *thd, THR_LOCK_DATA **to, enum thr_lock_type lock_type) override;
  int reset() override;
  int extra(enum ha_extra_function operation) override;

  /* ---- writes ---- */
  int write_row(const uchar *buf) override;
  int update_row(const uchar *old_data, const uchar *new_data) override;
  int delete_row(const uchar *buf) override;
  void get_auto_increment(ulonglong offset, ulonglong increment, ulonglong nb_desired_values,
                          ulonglong *first_value, ulonglong *nb_reserved_values) override;
  void release_auto_increment() override;

  /* ---- full scans and positions ---- */
  int rnd_init(bool scan) override;
  int rnd_next(uchar *buf) override;
  int rnd_end() override;
  int rnd_pos(uchar *buf, uchar *pos) override;
  void position(const uchar *record) override;

  /* ---- index reads ---- */
  int index_init(uint idx, bool sorted) override;
  int index_end() override;
  int index_read_map(uchar *buf, const uchar *key, key_part_map keypart_map,
                     enum ha_rkey_function find_flag) override;
  int index_read_last_map(uchar *buf, const uchar *key, key_part_map keypart_map) override;
  int index_next(uchar *buf) override;
  int index_prev(uchar *buf) override;
  int index_next_same(uchar *buf, const uchar *key, uint keylen) override;
  int index_first(uchar *buf) override;
  int index_last(uchar *buf) override;

  /* ---- index condition pushdown (icp.cc) ---- */
  Item *idx_cond_push(uint keyno, Item *idx_cond) override;

  /* ---- statistics and maintenance ---- */
  int info(uint flag) override;
  ha_rows records_in_range(uint inx, const key_range *min_key, const key_range *max_key,
                           page_range *pages) override;
  /* The cost overrides of the server in use (server_compat.h) and the engine's
     formulas behind them. */
  TIDESDB_HANDLER_COST_API
  double scan_cost();
  double read_cost(uint index, uint ranges, ha_rows rows);
  int analyze(THD *thd, HA_CHECK_OPT *check_opt) override;
  int check(THD *thd, HA_CHECK_OPT *check_opt) override;
  int optimize(THD *thd, HA_CHECK_OPT *check_opt) override;

  /* ---- FULLTEXT (fulltext.cc) ---- */
  FT_INFO *ft_init_ext(uint flags, uint inx, String *key) override;
  int ft_init() override;
  int ft_read(uchar *buf) override;
  /* Relevance of the row in record for a search (FT_INFO::find_relevance). */
  float ft_relevance_of(Tidesdb_ft_info *info, const uchar *record);
  /* The document of FULLTEXT key k of the row with primary key pk, read in the
     statement's transaction (a query's phrases and expansion): 0, 1 if the row is
     gone, else an error. */
  int ft_fetch_document(uint k, const uint8_t *pk, size_t pk_len, std::string *doc);

  /* ---- FOREIGN KEY (foreign_keys.cc) ---- */
  char *get_foreign_key_create_info() override;
  void free_foreign_key_create_info(char *str) override;
  int get_foreign_key_list(THD *thd, List<FOREIGN_KEY_INFO> *f_key_list) override;
  int get_parent_foreign_key_list(THD *thd, List<FOREIGN_KEY_INFO> *f_key_list) override;
  bool referenced_by_foreign_key() const noexcept override;
  bool can_switch_engines() override;

private:
  friend class Online_rebuild; /* online_rebuild.cc */
  /* The checks of a row change (foreign_key_checks = 1): as a child, its new
     values must exist in the parent (old_rec NULL for an insert); as a parent, its
     old referenced values must not be in a child (new_rec NULL for a delete).
     HA_ERR_NO_REFERENCED_ROW / HA_ERR_ROW_IS_REFERENCED with m_fk_error set. */
  int fk_check_child(const uchar *old_rec, const uchar *new_rec);
  int fk_check_parent(const uchar *old_rec, const uchar *new_rec);
  /* The table's constraints for this statement (loaded on its first write). */
  int fk_load();
  void fk_forget();
  /* ON DELETE / ON UPDATE CASCADE or SET NULL (rule) of constraint fk on the rows
     of its child table holding child_prefix, through the child's handler in the
     statement's open tables (new_rec: the parent's new row, NULL for a delete). */
  int fk_cascade(const tdb_fk_info *fk, uint32_t rule, const uchar *new_rec,
                 const std::string &child_prefix);
  /* The constraint whose cascade is writing this handler's row (not checked). */
  std::string m_fk_skip;
  tdb_fk_list *m_fk_child = nullptr;
  tdb_fk_list *m_fk_parent = nullptr;
  bool m_fk_loaded = false;
  std::string m_fk_error;

  /* FULLTEXT key k of a row change: appends its TDB_OP_FT_* ops (old_rec / new_rec
     NULL for an insert / delete) and returns true; false if k is not FULLTEXT. */
  bool ft_ops(uint k, const uchar *old_rec, const std::string &old_pk, const uchar *new_rec,
              const std::string &new_pk, std::vector<tdb_op> *ops, std::vector<uint> *op_keys);
  /* CHECK TABLE: FULLTEXT key k of a row adds its word count to expected[k]. */
  bool ft_check_row(uint k, const uchar *rec, std::vector<ha_rows> *expected);
  /* Documents behind the pointers of the ft ops of the current row change. */
  std::vector<std::string> m_ft_docs;

  /* Remembers a failed engine call's message and returns its HA_ERR_* code. */
  int fail(int status);
  /* CHECK / OPTIMIZE TABLE's result when an engine call failed with status. */
  int admin_failed(THD *thd, int status);
  /* ANALYZE TABLE's measurement (progress reported when progress is true). */
  int measure_statistics(THD *thd, bool progress);
  /* Measures the statistics again once enough rows changed (auto recalc). */
  void maybe_recalc_statistics(THD *thd);
  /* Copies the share's rec_per_key into this handler's TABLE. */
  void apply_statistics();
  uint64_t m_stats_version = UINT64_MAX;
  void note_row_change() {
    m_share->rows_changed.fetch_add(1, std::memory_order_relaxed);
    m_share->update_time.store(time(nullptr), std::memory_order_relaxed);
  }
  /* SHOW TABLE STATUS's Create_time and Update_time, as InnoDB gives them. */
  void report_times();
  /* The transaction this handler's engine calls run in: the connection's, or for a
     sequence table one of the handler's own (sequence.cc). */
  tdb_trx *trx();
  /* ---- SEQUENCE tables (sequence.cc) ---- */
  bool is_sequence() const {
    return table_share && table_share->table_type == TABLE_TYPE_SEQUENCE;
  }
  /* The handler's own transaction for a sequence table (begun on first use). */
  tdb_trx *sequence_trx();
  void sequence_trx_end();
  /* Commits a sequence write that applied with status (or rolls it back). */
  int sequence_commit(int status);
  tdb_trx *m_seq_trx = nullptr;
  bool is_pk(uint keynr) const { return !m_hidden_pk && keynr == table->s->primary_key; }
  /* The engine index (0 = rows) holding MariaDB key keynr. */
  uint engine_index(uint keynr) const { return m_key_to_engine[keynr]; }

  /* One entry of a secondary index (see the format at the top of ha_tidesdb.cc). */
  struct Index_entry {
    std::string key;
    std::string value;
    bool unique = false; /* the key must not exist yet */
    bool operator==(const Index_entry &o) const { return key == o.key && value == o.value; }
  };

  void encode_pk(const uchar *rec, std::string *out);
  void encode_secondary(uint keynr, const uchar *rec, const std::string &pk, Index_entry *out);
  /* The entry of key keynr of table (this handler's or an ALTER's new definition)
     for record rec, whose entries carry fields. */
  static void encode_entry(TABLE *table, uint keynr, const std::vector<Field *> &fields,
                           const uchar *rec, const std::string &pk, Index_entry *out);
  /* The same for a KEY whose parts name fields of table (not one of its keys).
     as_version_1: the value as entries of value version 1 hold it (see Format;
     written by older plugins, still read), for CHECK TABLE to compare with one. */
  static void encode_entry(TABLE *table, KEY *key, const std::vector<Field *> &fields,
                           const uchar *rec, const std::string &pk, Index_entry *out,
                           bool as_version_1 = false);
  /* CHECK TABLE: whether a stored entry value is e's (or its version 1 form). */
  bool entry_value_matches(uint key, const uchar *rec, const std::string &pk,
                           const Index_entry &e, const uint8_t *stored, size_t stored_len);
  /* Fills the new indexes of an in-place ALTER from the table's rows: with writes
     blocked (build_indexes), or while other connections write (online). */
  bool build_indexes(TABLE *altered_table, Alter_inplace_info *ha_alter_info);
  bool build_indexes_online(TABLE *altered_table, Alter_inplace_info *ha_alter_info);
  /* What the engine can do in place without rebuilding the table (the checks of
     check_if_supported_inplace_alter before an online rebuild is considered). */
  enum_alter_inplace_result in_place_support(TABLE *altered_table,
                                             Alter_inplace_info *ha_alter_info);
  /* The last check_if_supported_inplace_alter chose an online rebuild
     (online_rebuild.cc); only for LOCK=NONE when in place had a locked way. */
  bool m_rebuild_planned = false;
  bool m_rebuild_only_if_online = false;
  /* A row change's ops on the indexes an online ADD INDEX is building (nothing when
     none is): old_rec / new_rec NULL for an insert / a delete. */
  void online_index_ops(const uchar *old_rec, const std::string *old_pk, const uchar *new_rec,
                        const std::string *new_pk, std::vector<tdb_op> *ops,
                        std::vector<uint> *op_keys);
  /* This handler's copy of the share's online build (see Tidesdb_online_index). */
  struct Online_key {
    KEY key;
    std::vector<KEY_PART_INFO> parts;
    std::vector<Field *> covered;
    uint32_t slot;
    Index_entry old_e, new_e;
  };
  std::shared_ptr<const Tidesdb_online_build> m_online_src;
  std::vector<Online_key> m_online;
  /* The primary key an index entry points at, or false if the entry is damaged. */
  bool pk_of_entry(const uint8_t *key, size_t key_len, const uint8_t *value, size_t value_len,
                   const uint8_t **pk) const;
  /* Fills the covered columns (see Format) of the entry value into buf, for a
     keyread of m_cursor_key; false if the value is damaged. */
  bool unpack_entry_columns(uchar *buf, const uint8_t *key, size_t key_len, const uint8_t *value,
                            size_t value_len);
  int apply_ops(std::vector<tdb_op> &ops, const std::vector<uint> &op_keys);
  /* Galera: the certification keys of a row change just applied (wsrep.cc);
     change is TDB_WSREP_INSERT / UPDATE / DELETE, old_rec / new_rec NULL where
     the change has no such row. */
  int wsrep_row_keys(uint32_t change, const std::vector<tdb_op> &ops,
                     const std::vector<uint> &op_keys, const uchar *old_rec,
                     const uchar *new_rec);

  /* SPATIAL keys (spatial.cc). */
  int spatial_read(uchar *buf, const uchar *key, enum ha_rkey_function find_flag);
  int spatial_resume(uchar *buf);
  ha_rows spatial_records_in_range(uint inx, const key_range *min_key);
  int spatial_note(uint keynr, const std::string &entry_value);

  int open_cursor(uint engine_idx);
  int check_readable(uint engine_idx);
  void close_cursor();
  /* Finishes a cursor move whose status is st: reads the row of the entry it landed
     on into buf, stepping on (forward or back) past entries a locking read finds
     stale; not_found when the cursor ran out or left prefix. */
  int cursor_read(uchar *buf, int st, bool forward, const std::string *prefix, int not_found);
  /* index_next / index_prev, and index_first / index_last. */
  int index_step(uchar *buf, bool forward);
  int index_edge(uchar *buf, bool first);
  bool reads_pk_prefix_column() const;
  int fetch_entry_row(uchar *buf, const uint8_t *k, size_t klen, const uint8_t *v,
                      size_t vlen);
  /* The pushed index condition (if any, for this cursor's key) checked on record
     buf: 0 when it holds (or nothing was pushed), ICP_NO_MATCH, ICP_OUT_OF_RANGE or
     an HA_ERR_* code. */
  int index_cond_verdict(uchar *buf);
  static const int ICP_NO_MATCH = -1;     /* == ROW_GONE: the cursor moves on */
  static const int ICP_OUT_OF_RANGE = -2; /* the scan is over */
  /* Reads a row by primary key: a snapshot read, or a locking one (see m_lock_rows). */
  int read_row_by_pk(uchar *buf, const uint8_t *pk, size_t pk_len);
  int locked_read(uchar *buf, const uint8_t *pk, size_t pk_len);
  /* Before a locking read re-checks that the row still matches its entry: 0 when
     the cursor's key has no virtual part or they were computed into buf, 1 when
     they cannot be (buf is not record[0], or a part is not read): skip the check,
     -1 on an error computing them. */
  int recheck_virtual_parts(uchar *buf);
  int unpack_row(uchar *buf, const uint8_t *value, size_t len);
  /* The external-value facts about row `row_key` from the most recent decode of it
     into either record buffer, or nullptr if neither holds that row. */
  const tidesdb::External_state *external_state_for(const std::string &row_key) const;
  /* Encodes new_data as the row stored under new_pk, replacing the row stored under
     old_pk (nullptr for an insert), and adds the operations on external values to
     ops (their byte buffers are kept in bufs until the ops are applied). */
  int encode_row_change(const std::string *old_pk, const std::string &new_pk,
                        const uchar *new_data, std::vector<tdb_op> *external_ops,
                        std::deque<std::string> *bufs);
  /* The operations deleting the external values of the row stored under pk. */
  void external_deletes(const std::string &pk, std::vector<tdb_op> *ops,
                        std::deque<std::string> *bufs);
  /* The operations deleting the external values of columns dropped since the row
     stored under pk was written (st: the facts of its last decode, or nullptr). */
  void orphan_deletes(const std::string &pk, const tidesdb::External_state *st,
                      std::vector<tdb_op> *ops, std::deque<std::string> *bufs);
  void forget_external_state() { m_external[0].valid = m_external[1].valid = false; }
  /* OPTIMIZE TABLE's first step: rewrites the rows of older column definition
     versions in the current one (row_codec.h), counting them in *rewritten. 0 or
     a TDB_* status. */
  int rewrite_old_rows(THD *thd, ha_rows *rewritten);
  /* The number of committed rows, counted by a scan (fallback if it fails). */
  ha_rows count_rows_committed(uint64_t fallback, uint64_t committed_seq);
  /* persist_only: a failed insert InnoDB's persisted counter would cover. */
  void observe_auto_increment(const uchar *rec, bool persist_only = false);
  ulonglong ensure_auto_increment_seeded();

  THR_LOCK_DATA m_lock;
  Tidesdb_share *m_share = nullptr;
  tdb_table *m_tbl = nullptr;
  tdb_cursor *m_cursor = nullptr;
  uint m_cursor_index = 0;
  bool m_cursor_latest = false; /* the cursor reads the latest state, not the snapshot */
  /* After a point read by primary key the cursor is not positioned; index_next /
     index_prev then seek from m_last_pk. */
  bool m_cursor_positioned = false;
  bool m_rnd_started = false;
  uint m_cursor_key = MAX_KEY; /* MariaDB key the index cursor reads */
  /* Row locks taken by this statement's reads (set in store_lock). */
  enum { ROW_LOCK_NONE, ROW_LOCK_SHARED, ROW_LOCK_EXCLUSIVE } m_lock_rows = ROW_LOCK_NONE;
  bool m_hidden_pk = false;
  /* SELECT ... SKIP LOCKED: locking reads skip rows another transaction holds. */
  bool m_skip_locked = false;
  uint m_pk_len = 0;
  std::vector<uint> m_key_to_engine;
  mutable int m_unique_reordered = -1; /* unique_keys_reordered's answer, -1: not asked */
  /* Per key: every part is covered (part_is_covered), so an index-only read puts
     all of the key's columns in the record. */
  std::vector<bool> m_key_fully_covered;
  uchar *m_scratch_rec = nullptr;
  /* How this TABLE's rows name their columns (row_codec.h), from the catalog. */
  tidesdb::Row_layout m_layout;

  /* The window search the index cursor is in (tdb_mbr_mode, UINT32_MAX: none)
     and its query MBR. */
  uint32_t m_spatial_mode = UINT32_MAX;
  double m_spatial_query[4] = {0, 0, 0, 0};
  std::string m_search_key;
  std::string m_last_pk;  /* primary key (or hidden row id) of the last row read */
  std::string m_row_buf;
  std::string m_value[2]; /* bytes behind the BLOB pointers of record[0] / record[1] */
  /* External BLOB/TEXT values of the rows in record[0] / record[1]. */
  tidesdb::External_state m_external[2];
  uint64_t m_external_seq = 0;
  tidesdb::Row_externals m_row_externals;
  std::vector<Index_entry> m_entries;
  /* Per MariaDB key: the columns its entries carry (empty for the primary key). */
  std::vector<std::vector<Field *>> m_covered;
  /* Engine key of the last secondary index entry read: index_next / index_prev /
     rnd_next continue from it (or from m_last_pk) when the cursor was closed in
     between (HANDLER ... READ NEXT runs each read as its own statement). */
  std::string m_last_entry_key;
  std::string m_last_error;
  uint m_dup_key = 0;
  /* AUTO_INCREMENT values the statement still needs (InnoDB's n_autoinc_rows). */
  ulonglong m_autoinc_rows = 0;
  std::string m_name;
  /* FLUSH TABLES ... FOR EXPORT wrote the table's export files: removed at unlock. */
  bool m_exported = false;
};

#endif
