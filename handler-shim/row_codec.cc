/* row_codec: see row_codec.h for the format. */
#include "row_codec.h"
#include <algorithm>

namespace tidesdb {

static const uchar ROW_FORMAT_V1 = 1;
static const uchar ROW_FORMAT_V2 = 2;
static const uchar ROW_FORMAT_V3 = 3;
static const size_t V3_HEAD = 7; /* version byte, u32 definition version, u16 N */
static const size_t MAX_VARINT = 5;
static const uchar TAG_INLINE = 0;
static const uchar TAG_EXTERNAL = 1;

static bool is_blob(const Field *f) { return f->flags & BLOB_FLAG; }

/* Bytes encode_row may write. The bytes of a BLOB that goes external are not
   counted (its tag and length fit in pack_length() + 5): the buffer is resized to
   this bound, which zero-fills it, so counting a 1 MiB external value cost a
   1 MiB memset per row written. */
static size_t packed_upper_bound(TABLE *table, const uchar *rec, const Row_externals *ext) {
  size_t n = 3 + table->s->null_bytes;
  my_ptrdiff_t diff = rec - table->record[0];
  for (Field **fp = table->field; *fp; fp++) {
    Field *f = *fp;
    if (!f->stored_in_db()) continue;
    n += f->pack_length() + 5;
    if (is_blob(f)) {
      f->move_field_offset(diff);
      size_t len = ((Field_blob *)f)->get_length();
      f->move_field_offset(-diff);
      bool external = ext && table->s->blob_fields > 0 && len >= EXTERNAL_BLOB_MIN;
      if (!external) n += len;
    }
  }
  return n;
}

void external_key(const std::string &row_key, uint32_t column_no, std::string *out) {
  out->assign(row_key);
  out->push_back((char)((column_no >> 8) & 0xFF));
  out->push_back((char)(column_no & 0xFF));
}

/* ------------------------------------------------------------------ Row_layout */

const uint32_t Row_layout::NO_COLUMN;

bool Row_layout::load(TABLE *table, const std::vector<uint32_t> &flat) {
  m_versioned = false;
  m_versions.clear();
  m_fields_of.clear();
  m_field_ids.clear();
  m_dropped_blobs.clear();
  if (flat.empty()) return true;
  if (flat.size() < 2) return false;
  size_t at = 2;
  for (uint32_t v = 0; v < flat[1]; v++) {
    if (flat.size() < at + 2) return false;
    uint32_t version = flat[at], n = flat[at + 1];
    at += 2;
    if ((flat.size() - at) / 2 < n) return false;
    std::vector<Column> &cols = m_versions[version];
    for (uint32_t i = 0; i < n; i++, at += 2) cols.push_back({flat[at], (flat[at + 1] & 1) != 0});
  }
  if (at != flat.size()) return false;
  m_versioned = true;
  m_version = flat[0];
  const std::vector<Column> *cur = columns_of(m_version);
  if (!cur || cur->size() != table->s->stored_fields) return false;
  m_field_ids.assign(table->s->fields, NO_COLUMN);
  size_t i = 0;
  for (Field **fp = table->field; *fp; fp++)
    if ((*fp)->stored_in_db()) m_field_ids[(*fp)->field_index] = (*cur)[i++].id;
  index_fields();
  return true;
}

void Row_layout::derive(const Row_layout &from, TABLE *to, uint32_t version,
                        const std::vector<uint32_t> &ids) {
  m_versioned = true;
  m_version = version;
  m_versions = from.m_versions;
  std::vector<Column> &cols = m_versions[version];
  cols.clear();
  m_field_ids.assign(to->s->fields, NO_COLUMN);
  size_t i = 0;
  for (Field **fp = to->field; *fp; fp++) {
    if (!(*fp)->stored_in_db() || i >= ids.size()) continue;
    m_field_ids[(*fp)->field_index] = ids[i];
    cols.push_back({ids[i++], ((*fp)->flags & BLOB_FLAG) != 0});
  }
  m_fields_of.clear();
  index_fields();
}

void Row_layout::index_fields() {
  std::map<uint32_t, uint32_t> field_of_id;
  for (uint32_t f = 0; f < m_field_ids.size(); f++)
    if (m_field_ids[f] != NO_COLUMN) field_of_id[m_field_ids[f]] = f;
  m_dropped_blobs.clear();
  for (const auto &v : m_versions) {
    std::vector<uint32_t> &fields = m_fields_of[v.first];
    for (const Column &c : v.second) {
      auto it = field_of_id.find(c.id);
      fields.push_back(it == field_of_id.end() ? NO_COLUMN : it->second);
      if (it == field_of_id.end() && c.blob &&
          std::find(m_dropped_blobs.begin(), m_dropped_blobs.end(), c.id) == m_dropped_blobs.end())
        m_dropped_blobs.push_back(c.id);
    }
  }
}

const std::vector<Row_layout::Column> *Row_layout::columns_of(uint32_t version) const {
  auto it = m_versions.find(version);
  return it == m_versions.end() ? nullptr : &it->second;
}

const std::vector<uint32_t> *Row_layout::fields_of(uint32_t version) const {
  auto it = m_fields_of.find(version);
  return it == m_fields_of.end() ? nullptr : &it->second;
}

bool row_definition_version(const std::string &value, uint32_t *version) {
  if (value.empty()) return false;
  if ((uchar)value[0] != ROW_FORMAT_V3) {
    *version = 0;
    return true;
  }
  if (value.size() < V3_HEAD) return false;
  *version = uint4korr((const uchar *)value.data() + 1);
  return true;
}

/* ------------------------------------------------------------------ version 3 */

static uchar *put_varint(uchar *p, size_t v) {
  while (v >= 0x80) {
    *p++ = (uchar)(v | 0x80);
    v >>= 7;
  }
  *p++ = (uchar)v;
  return p;
}

static const uchar *get_varint(const uchar *p, const uchar *end, size_t *v) {
  size_t out = 0;
  for (uint shift = 0; p < end && shift < 35; shift += 7) {
    uchar b = *p++;
    out |= (size_t)(b & 0x7F) << shift;
    if (!(b & 0x80)) {
      *v = out;
      return p;
    }
  }
  return nullptr;
}

static void encode_row_v3(TABLE *table, const Row_layout &layout, const uchar *rec,
                          std::string *out, Row_externals *ext) {
  uint n = table->s->stored_fields;
  size_t bitmap = (n + 7) / 8;
  uchar *start = (uchar *)&(*out)[0];
  uchar *p = start;
  *p++ = ROW_FORMAT_V3;
  int4store(p, layout.version());
  p += 4;
  int2store(p, n);
  p += 2;
  uchar *nulls = p;
  memset(nulls, 0, bitmap);
  p += bitmap;
  my_ptrdiff_t diff = rec - table->record[0];
  uint i = 0;
  for (Field **fp = table->field; *fp; fp++) {
    Field *f = *fp;
    if (!f->stored_in_db()) continue;
    uint col = i++;
    if (f->is_null_in_record(rec)) {
      nulls[col / 8] |= (uchar)(1 << (col % 8));
      continue;
    }
    /* The value goes after a one-byte length, moved on if the length needs more. */
    uchar *len_at = p;
    uchar *data = p + 1;
    uchar *q = data;
    if (is_blob(f)) {
      uint idx = f->field_index;
      f->move_field_offset(diff);
      Field_blob *b = (Field_blob *)f;
      size_t len = b->get_length();
      const uchar *bytes = b->get_ptr();
      f->move_field_offset(-diff);
      if (ext && idx < ext->keep.size() && ext->keep[idx] != NOT_EXTERNAL) {
        *q++ = TAG_EXTERNAL;
        int4store(q, (uint32)ext->keep[idx]);
        q += 4;
      } else if (ext && len >= EXTERNAL_BLOB_MIN) {
        *q++ = TAG_EXTERNAL;
        int4store(q, (uint32)len);
        q += 4;
        ext->written.push_back({idx, bytes, len});
      } else {
        *q++ = TAG_INLINE;
        f->move_field_offset(diff);
        q = f->pack(q, f->ptr, UINT_MAX);
        f->move_field_offset(-diff);
      }
    } else {
      f->move_field_offset(diff);
      q = f->pack(q, f->ptr, UINT_MAX);
      f->move_field_offset(-diff);
    }
    size_t len = (size_t)(q - data);
    uchar lenbuf[MAX_VARINT];
    size_t lenlen = (size_t)(put_varint(lenbuf, len) - lenbuf);
    if (lenlen > 1) memmove(data + lenlen - 1, data, len);
    memcpy(len_at, lenbuf, lenlen);
    p = len_at + lenlen + len;
  }
  out->resize((size_t)(p - start));
}

/* An external BLOB value (TAG_EXTERNAL + u32 length) of field f in the record at
   f->ptr + diff: read through the reader when it wants the column, else empty. */
static bool read_external_blob(Field *f, size_t ext_len, my_ptrdiff_t diff, const Row_layout &layout,
                               External_reader *reader, std::vector<int64_t> *external_len) {
  if (external_len) (*external_len)[f->field_index] = (int64_t)ext_len;
  const uchar *data = nullptr;
  size_t got = 0;
  if (reader && reader->wanted(f)) {
    data = reader->read(f, layout.column_no(f), ext_len);
    if (!data) return false;
    got = ext_len;
  }
  f->move_field_offset(diff);
  ((Field_blob *)f)->set_ptr((uint32)got, (uchar *)data);
  f->move_field_offset(-diff);
  return true;
}

static bool decode_row_v3(TABLE *table, const Row_layout &layout, const std::string &value,
                          uchar *buf, External_reader *reader, std::vector<int64_t> *external_len,
                          std::vector<uint32_t> *orphans) {
  const uchar *p = (const uchar *)value.data();
  const uchar *end = p + value.size();
  if (value.size() < V3_HEAD) return false;
  uint32_t version = uint4korr(p + 1);
  uint n = uint2korr(p + 5);
  const std::vector<Row_layout::Column> *cols = layout.columns_of(version);
  const std::vector<uint32_t> *fields = layout.fields_of(version);
  size_t bitmap = (n + 7) / 8;
  if (!cols || !fields || cols->size() != n || value.size() < V3_HEAD + bitmap) return false;
  const uchar *nulls = p + V3_HEAD;
  p += V3_HEAD + bitmap;
  /* As for versions 1 / 2: fields the row does not set hold their defaults. */
  memcpy(buf, table->s->default_values, table->s->reclength);
  my_ptrdiff_t diff = buf - table->record[0];
  for (uint i = 0; i < n; i++) {
    uint32_t fi = (*fields)[i];
    Field *f = fi == Row_layout::NO_COLUMN || fi >= table->s->fields ? nullptr : table->field[fi];
    if (nulls[i / 8] & (1 << (i % 8))) {
      if (f && f->real_maybe_null()) f->set_null(diff);
      continue;
    }
    size_t len;
    p = get_varint(p, end, &len);
    if (!p || (size_t)(end - p) < len) return false;
    const uchar *col_end = p + len;
    if (!f) {
      /* A column dropped since: an external value of it is an orphan. */
      if ((*cols)[i].blob && len == 5 && *p == TAG_EXTERNAL && orphans)
        orphans->push_back((*cols)[i].id);
      p = col_end;
      continue;
    }
    if (f->real_maybe_null()) f->set_notnull(diff);
    if (is_blob(f)) {
      if (p >= col_end) return false;
      uchar tag = *p++;
      if (tag == TAG_EXTERNAL) {
        if (col_end - p != 4) return false;
        size_t ext_len = uint4korr(p);
        p += 4;
        if (!read_external_blob(f, ext_len, diff, layout, reader, external_len)) return false;
        continue;
      }
      if (tag != TAG_INLINE) return false;
    }
    f->move_field_offset(diff);
    const uchar *next = f->unpack(f->ptr, p, col_end, 0);
    f->move_field_offset(-diff);
    if (next != col_end) return false;
    p = col_end;
  }
  return p == end;
}

/* ------------------------------------------------------------ versions 1 and 2 */

void encode_row(TABLE *table, const Row_layout &layout, const uchar *rec, std::string *out,
                Row_externals *ext) {
  if (ext) ext->written.clear();
  if (layout.versioned()) {
    out->resize(packed_upper_bound(table, rec, ext) + V3_HEAD + table->s->stored_fields / 8 +
                MAX_VARINT * table->s->stored_fields);
    encode_row_v3(table, layout, rec, out, ext);
    return;
  }
  bool v2 = table->s->blob_fields > 0;
  out->resize(packed_upper_bound(table, rec, ext));
  uchar *start = (uchar *)&(*out)[0];
  uchar *p = start;
  *p++ = v2 ? ROW_FORMAT_V2 : ROW_FORMAT_V1;
  uint stored = 0;
  for (Field **fp = table->field; *fp; fp++)
    if ((*fp)->stored_in_db()) stored++;
  int2store(p, stored);
  p += 2;
  memcpy(p, rec, table->s->null_bytes);
  p += table->s->null_bytes;
  my_ptrdiff_t diff = rec - table->record[0];
  for (Field **fp = table->field; *fp; fp++) {
    Field *f = *fp;
    if (!f->stored_in_db() || f->is_null_in_record(rec)) continue;
    if (v2 && is_blob(f)) {
      uint idx = f->field_index;
      if (ext && idx < ext->keep.size() && ext->keep[idx] != NOT_EXTERNAL) {
        *p++ = TAG_EXTERNAL;
        int4store(p, (uint32)ext->keep[idx]);
        p += 4;
        continue;
      }
      f->move_field_offset(diff);
      Field_blob *b = (Field_blob *)f;
      size_t len = b->get_length();
      const uchar *data = b->get_ptr();
      f->move_field_offset(-diff);
      if (ext && len >= EXTERNAL_BLOB_MIN) {
        *p++ = TAG_EXTERNAL;
        int4store(p, (uint32)len);
        p += 4;
        ext->written.push_back({idx, data, len});
        continue;
      }
      *p++ = TAG_INLINE;
    }
    f->move_field_offset(diff);
    p = f->pack(p, f->ptr, UINT_MAX);
    f->move_field_offset(-diff);
  }
  out->resize((size_t)(p - start));
}

/* Marks in mask (null_bytes long) the null-byte bits of field f of table: its
   NULL bit and, for BIT(n), the n % 8 high bits kept among the null bits. */
static void mark_null_bits(TABLE *table, Field *f, uchar *mask) {
  const uchar *base = table->record[0];
  if (f->null_ptr) mask[f->null_ptr - base] |= f->null_bit;
  if (f->type() == MYSQL_TYPE_BIT) {
    Field_bit *b = (Field_bit *)f;
    for (uint i = 0; i < b->bit_len; i++) {
      uint bit = b->bit_ofs + i;
      mask[(b->bit_ptr - base) + bit / 8] |= (uchar)(1 << (bit % 8));
    }
  }
}

/* A row written before an instant ADD COLUMN (see inplace_alter.cc) holds the
   first `stored` stored columns, and null bytes as long as its table had then.
   The columns added since come last in the field list, and the columns before
   them kept their null-bit positions, so that table is the current one cut
   before its (stored + 1)-th stored column. mask receives the bits of the
   row's null bytes that belong to the row (the others come from the defaults);
   returns the row's null-byte count. */
static size_t prefix_null_bytes(TABLE *table, uint stored, std::vector<uchar> *mask) {
  mask->assign(table->s->null_bytes, 0);
  /* The 'delete marker' bit of tables without HA_OPTION_PACK_RECORD. */
  if (table->s->null_bytes && !(table->s->db_create_options & HA_OPTION_PACK_RECORD))
    (*mask)[0] |= 1;
  uint seen = 0;
  for (Field **fp = table->field; *fp; fp++) {
    if ((*fp)->stored_in_db() && ++seen > stored) break;
    mark_null_bits(table, *fp, mask->data());
  }
  size_t n = mask->size();
  while (n > 0 && (*mask)[n - 1] == 0) n--;
  return n;
}

bool decode_row(TABLE *table, const Row_layout &layout, const std::string &value, uchar *buf,
                External_reader *reader, std::vector<int64_t> *external_len,
                std::vector<uint32_t> *orphans) {
  const uchar *p = (const uchar *)value.data();
  const uchar *end = p + value.size();
  if (external_len) external_len->assign(table->s->fields, NOT_EXTERNAL);
  if (orphans) orphans->clear();
  if (!value.empty() && p[0] == ROW_FORMAT_V3)
    return layout.versioned() &&
           decode_row_v3(table, layout, value, buf, reader, external_len, orphans);
  if (value.size() < 3 || (p[0] != ROW_FORMAT_V1 && p[0] != ROW_FORMAT_V2)) return false;
  bool v2 = p[0] == ROW_FORMAT_V2;
  uint stored = uint2korr(p + 1);
  if (stored > table->s->stored_fields) return false;
  bool older_row = stored < table->s->stored_fields; /* before an instant ADD COLUMN */
  std::vector<uchar> mask;
  size_t null_bytes = older_row ? prefix_null_bytes(table, stored, &mask) : table->s->null_bytes;
  if (value.size() < 3 + null_bytes) return false;
  p += 3;
  /* Columns that are NULL (and bytes no column writes) get the table's default
     image, as in InnoDB: the server compares whole records to tell whether an
     UPDATE changed a row, so nothing may linger from the previous row read.
     Columns added since an older row was written read as their defaults. */
  memcpy(buf, table->s->default_values, table->s->reclength);
  if (older_row) {
    for (size_t i = 0; i < null_bytes; i++)
      buf[i] = (uchar)((p[i] & mask[i]) | (buf[i] & ~mask[i]));
  } else {
    memcpy(buf, p, null_bytes);
  }
  p += null_bytes;
  my_ptrdiff_t diff = buf - table->record[0];
  uint seen = 0;
  for (Field **fp = table->field; *fp && seen < stored; fp++) {
    Field *f = *fp;
    if (!f->stored_in_db()) continue;
    seen++;
    if (f->is_null_in_record(buf)) continue;
    if (v2 && is_blob(f)) {
      if (p >= end) return false;
      uchar tag = *p++;
      if (tag == TAG_EXTERNAL) {
        if (end - p < 4) return false;
        size_t len = uint4korr(p);
        p += 4;
        if (!read_external_blob(f, len, diff, layout, reader, external_len)) return false;
        continue;
      }
      if (tag != TAG_INLINE) return false;
    }
    f->move_field_offset(diff);
    const uchar *next = f->unpack(f->ptr, p, end, 0);
    f->move_field_offset(-diff);
    if (next == NULL || next > end) return false;
    p = next;
  }
  return seen == stored && p == end;
}

}  // namespace tidesdb
