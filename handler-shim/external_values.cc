/* external_values: see external_values.h. */
#include "external_values.h"

namespace tidesdb {

int read_external(tdb_trx *trx, tdb_table *tbl, const std::string &row_key, uint32_t column_no,
                  bool latest, std::string *out) {
  std::string key;
  external_key(row_key, column_no, &key);
  const uint8_t *v;
  size_t vlen;
  int st = latest ? tdb_get_latest(trx, tbl, TDB_BLOB_INDEX, (const uint8_t *)key.data(),
                                   key.size(), &v, &vlen)
                  : tdb_get(trx, tbl, TDB_BLOB_INDEX, (const uint8_t *)key.data(), key.size(),
                            &v, &vlen);
  if (st) return st;
  out->assign((const char *)v, vlen);
  return 0;
}

int Pinned_value::read(tdb_trx *trx, tdb_table *tbl, uint32_t index, const std::string &key,
                       bool latest) {
  reset();
  const uint8_t *v;
  size_t vlen;
  int st = tdb_get_pinned(trx, tbl, index, (const uint8_t *)key.data(), key.size(),
                          latest ? 1 : 0, &m_pin, &v, &vlen);
  if (st) {
    m_pin = nullptr;
    return st;
  }
  m_data = (const uchar *)v;
  m_len = vlen;
  return 0;
}

void Pinned_value::reset() {
  if (m_pin) tdb_value_release(m_pin);
  m_pin = nullptr;
  m_data = nullptr;
  m_len = 0;
}

bool field_in_any_key(TABLE *table, Field *field) {
  for (uint k = 0; k < table->s->keys; k++) {
    const KEY &key = table->key_info[k];
    for (uint p = 0; p < key.user_defined_key_parts; p++)
      if (key.key_part[p].fieldnr == field->field_index + 1) return true;
  }
  return false;
}

bool Engine_external_reader::wanted(Field *field) {
  if (m_want == WANT_ALL) return true;
  if (m_want == WANT_NONE) return false;
  if (m_want == WANT_KEYS) return field_in_any_key(m_table, field);
  return bitmap_is_set(m_table->read_set, field->field_index) ||
         bitmap_is_set(m_table->write_set, field->field_index) ||
         field_in_any_key(m_table, field);
}

const uchar *Engine_external_reader::read(Field *field, uint32_t column_no, size_t len) {
  uint idx = field->field_index;
  if (!m_state) {
    status = TDB_INVALID;
    error = "no buffer for an external value";
    return nullptr;
  }
  if (m_state->buffers.size() < m_table->s->fields) m_state->buffers.resize(m_table->s->fields);
  Pinned_value *buf = &m_state->buffers[idx];
  external_key(m_row_key, column_no, &m_key);
  status = buf->read(m_trx, m_tbl, TDB_BLOB_INDEX, m_key, m_latest);
  if (status) {
    error = status == TDB_NOT_FOUND ? "an external BLOB/TEXT value of a row is missing"
                                    : std::string("an external BLOB/TEXT value could not be read: ") +
                                          tdb_last_error();
    return nullptr;
  }
  if (buf->size() != len) {
    status = TDB_CORRUPTION;
    error = "an external BLOB/TEXT value has not the length its row records";
    buf->reset();
    return nullptr;
  }
  if (m_state) {
    if (m_state->loaded.size() < m_table->s->fields) m_state->loaded.resize(m_table->s->fields);
    m_state->loaded[idx] = true;
  }
  /* A zero-length value never goes external, so data() is never NULL here; the
     record keeps pointing at the engine's buffer until the next decode. */
  return buf->data();
}

}  // namespace tidesdb
