/*
  Index condition pushdown (ICP) for ha_tidesdb.

  The server hands over the part of a WHERE clause that reads only columns of the
  index being scanned (idx_cond_push). A secondary index entry carries those columns
  (the covered columns of the Format in ha_tidesdb.cc), so the condition is checked
  on the entry before the row is fetched: entries that fail it cost no row read.
  Only secondary keys whose every part is covered take the condition: the server's
  end-of-range check (part of handler_index_cond_check) compares all key parts of
  record[0], and a prefix or BLOB part cannot be restored from an entry. Locking
  reads check the condition on the row they locked (its latest version).
*/
#include "ha_tidesdb.h"

using namespace tidesdb;

Item *ha_tidesdb::idx_cond_push(uint keyno, Item *idx_cond) {
  if (keyno >= table->s->keys || is_pk(keyno)) return idx_cond;
  const KEY *key = &table->key_info[keyno];
  for (uint p = 0; p < key->user_defined_key_parts; p++)
    if (!part_is_covered(&key->key_part[p])) return idx_cond;
  pushed_idx_cond = idx_cond;
  pushed_idx_cond_keyno = keyno;
  in_range_check_pushed_down = TRUE;
  return NULL;
}

int ha_tidesdb::index_cond_verdict(uchar *buf) {
  if (!pushed_idx_cond || pushed_idx_cond_keyno != m_cursor_key || buf != table->record[0])
    return 0;
  switch (handler_index_cond_check(this)) {
  case CHECK_POS:
    return 0;
  case CHECK_NEG:
    return ICP_NO_MATCH;
  case CHECK_OUT_OF_RANGE:
    return ICP_OUT_OF_RANGE;
  case CHECK_ABORTED_BY_USER:
    return HA_ERR_ABORTED_BY_USER;
  default:
    return HA_ERR_INTERNAL_ERROR;
  }
}
