/*
  spatial: SPATIAL keys (see spatial.h), and the ha_tidesdb methods that read them.
*/
#include "spatial.h"
#include "ha_tidesdb.h"

namespace tidesdb {

static const uchar SPATIAL_ENTRY_HEADER = 0x10;

void spatial_mbr_of_image(const uchar *image, double mbr[4]) {
  for (int i = 0; i < 4; i++) float8get(mbr[i], image + 8 * i);
}

void spatial_mbr_of_record(const KEY *key, const uchar *rec, double mbr[4]) {
  const KEY_PART_INFO *kp = &key->key_part[0];
  uchar image[SPATIAL_MBR_LEN];
  /* An empty or unreadable geometry gets an all-zero MBR, as in the server's
     own key images. */
  kp->field->get_key_image(image, SPATIAL_MBR_LEN, kp->field->ptr_in_record(rec),
                           Field::itMBR);
  spatial_mbr_of_image(image, mbr);
}

void encode_spatial_entry(const KEY *key, const uchar *rec, const std::string &pk,
                          std::string *entry_key, std::string *entry_value) {
  double mbr[4];
  spatial_mbr_of_record(key, rec, mbr);
  uint8_t prefix[8];
  tdb_spatial_key(mbr, prefix);
  entry_key->assign((const char *)prefix, sizeof(prefix));
  entry_key->append(pk);
  entry_value->clear();
  entry_value->push_back((char)SPATIAL_ENTRY_HEADER);
  uchar image[SPATIAL_MBR_LEN];
  for (int i = 0; i < 4; i++) float8store(image + 8 * i, mbr[i]);
  entry_value->append((const char *)image, sizeof(image));
}

void spatial_mbr_of_value(const std::string &value, double mbr[4]) {
  if (value.size() < SPATIAL_MBR_LEN) {
    for (int i = 0; i < 4; i++) mbr[i] = 0;
    return;
  }
  spatial_mbr_of_image((const uchar *)value.data() + value.size() - SPATIAL_MBR_LEN, mbr);
}

uint32_t spatial_mode(enum ha_rkey_function flag) {
  switch (flag) {
  case HA_READ_MBR_INTERSECT:
    return TDB_MBR_INTERSECT;
  case HA_READ_MBR_CONTAIN:
    return TDB_MBR_CONTAIN;
  case HA_READ_MBR_WITHIN:
    return TDB_MBR_WITHIN;
  case HA_READ_MBR_DISJOINT:
    return TDB_MBR_DISJOINT;
  case HA_READ_MBR_EQUAL:
  /* A key lookup of an exact MBR (no range of the optimizer makes one). */
  case HA_READ_KEY_EXACT:
    return TDB_MBR_EQUAL;
  default:
    return UINT32_MAX;
  }
}

}  // namespace tidesdb

using namespace tidesdb;

/* index_read_map on a SPATIAL key: a window search, continued by index_next /
   index_next_same. */
int ha_tidesdb::spatial_read(uchar *buf, const uchar *key, enum ha_rkey_function find_flag) {
  uint32_t mode = spatial_mode(find_flag);
  if (mode == UINT32_MAX) return HA_ERR_WRONG_COMMAND;
  if (!m_cursor) {
    if (int err = open_cursor(engine_index(active_index))) return err;
  }
  m_cursor_key = active_index;
  spatial_mbr_of_image(key, m_spatial_query);
  m_spatial_mode = mode;
  int st = tdb_cursor_spatial_seek(m_cursor, mode, m_spatial_query, nullptr, 0);
  return cursor_read(buf, st, true, nullptr, HA_ERR_KEY_NOT_FOUND);
}

/* index_next after the cursor was closed during a window search: the search
   resumes after the last entry read. */
int ha_tidesdb::spatial_resume(uchar *buf) {
  if (!m_cursor) {
    if (int err = open_cursor(engine_index(active_index))) return err;
  }
  int st = tdb_cursor_spatial_seek(m_cursor, m_spatial_mode, m_spatial_query,
                                   (const uint8_t *)m_last_entry_key.data(),
                                   m_last_entry_key.size());
  return cursor_read(buf, st, true, nullptr, HA_ERR_END_OF_FILE);
}

/* Rows a window search returns: counted through the index up to a cap (entries
   only, no rows are read), extrapolated beyond it. */
ha_rows ha_tidesdb::spatial_records_in_range(uint inx, const key_range *min_key) {
  if (!min_key) return stats.records ? stats.records : 1;
  uint32_t mode = spatial_mode(min_key->flag);
  if (mode == UINT32_MAX || mode == TDB_MBR_DISJOINT) return stats.records ? stats.records : 1;
  double q[4];
  spatial_mbr_of_image(min_key->key, q);
  /* Beyond a few hundred rows the exact number no longer changes the plan. */
  uint64_t n = tdb_spatial_estimate(trx(), m_tbl, engine_index(inx), mode, q, 400);
  if (n == UINT64_MAX) return stats.records ? stats.records : 1;
  return n ? (ha_rows)n : 1;
}

/* Before an entry goes into SPATIAL key keynr: the index's extent covers it. */
int ha_tidesdb::spatial_note(uint keynr, const std::string &entry_value) {
  double mbr[4];
  spatial_mbr_of_value(entry_value, mbr);
  int st = tdb_spatial_note(m_tbl, engine_index(keynr), mbr);
  return st ? fail(st) : 0;
}
