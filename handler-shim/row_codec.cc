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

bool decode_row(TABLE *table, const std::string &value, uchar *buf, External_reader *reader,
                std::vector<int64_t> *external_len) {
  const uchar *p = (const uchar *)value.data();
  const uchar *end = p + value.size();
  size_t header = 3 + table->s->null_bytes;
  if (external_len) external_len->assign(table->s->fields, NOT_EXTERNAL);
  if (value.size() < header || (p[0] != ROW_FORMAT_V1 && p[0] != ROW_FORMAT_V2)) return false;
  bool v2 = p[0] == ROW_FORMAT_V2;
  uint stored = uint2korr(p + 1);
  p += 3;
  /* Columns that are NULL (and bytes no column writes) get the table's default
     image, as in InnoDB: the server compares whole records to tell whether an
     UPDATE changed a row, so nothing may linger from the previous row read. */
  memcpy(buf, table->s->default_values, table->s->reclength);
  memcpy(buf, p, table->s->null_bytes);
  p += table->s->null_bytes;
  my_ptrdiff_t diff = buf - table->record[0];
  uint seen = 0;
  for (Field **fp = table->field; *fp; fp++) {
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
