/* row_codec: see row_codec.h for the format. */
#include "row_codec.h"

namespace tidesdb {

static const uchar ROW_FORMAT_V1 = 1;
static const uchar ROW_FORMAT_V2 = 2;
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

void external_key(const std::string &row_key, uint field_index, std::string *out) {
  out->assign(row_key);
  out->push_back((char)(field_index >> 8));
  out->push_back((char)(field_index & 0xFF));
}

void encode_row(TABLE *table, const uchar *rec, std::string *out, Row_externals *ext) {
  bool v2 = table->s->blob_fields > 0;
  if (ext) ext->written.clear();
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

bool decode_row(TABLE *table, const std::string &value, uchar *buf, External_reader *reader,
                std::vector<int64_t> *external_len) {
  const uchar *p = (const uchar *)value.data();
  const uchar *end = p + value.size();
  if (external_len) external_len->assign(table->s->fields, NOT_EXTERNAL);
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
        if (external_len) (*external_len)[f->field_index] = (int64_t)len;
        const uchar *data = nullptr;
        size_t got = 0;
        if (reader && reader->wanted(f)) {
          data = reader->read(f, len);
          if (!data) return false;
          got = len;
        }
        f->move_field_offset(diff);
        ((Field_blob *)f)->set_ptr((uint32)got, (uchar *)data);
        f->move_field_offset(-diff);
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
