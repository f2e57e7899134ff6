/* row_codec: see row_codec.h for the format. */
#include "row_codec.h"

namespace tidesdb {

static const uchar ROW_FORMAT_VERSION = 1;

static size_t packed_upper_bound(TABLE *table, const uchar *rec) {
  size_t n = 3 + table->s->null_bytes;
  my_ptrdiff_t diff = rec - table->record[0];
  for (Field **fp = table->field; *fp; fp++) {
    Field *f = *fp;
    if (!f->stored_in_db()) continue;
    n += f->pack_length() + 4;
    if (f->flags & BLOB_FLAG) {
      f->move_field_offset(diff);
      n += ((Field_blob *)f)->get_length();
      f->move_field_offset(-diff);
    }
  }
  return n;
}

void encode_row(TABLE *table, const uchar *rec, std::string *out) {
  out->resize(packed_upper_bound(table, rec));
  uchar *start = (uchar *)&(*out)[0];
  uchar *p = start;
  *p++ = ROW_FORMAT_VERSION;
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
    f->move_field_offset(diff);
    p = f->pack(p, f->ptr, UINT_MAX);
    f->move_field_offset(-diff);
  }
  out->resize((size_t)(p - start));
}

bool decode_row(TABLE *table, const std::string &value, uchar *buf) {
  const uchar *p = (const uchar *)value.data();
  const uchar *end = p + value.size();
  size_t header = 3 + table->s->null_bytes;
  if (value.size() < header || p[0] != ROW_FORMAT_VERSION) return false;
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
    f->move_field_offset(diff);
    const uchar *next = f->unpack(f->ptr, p, end, 0);
    f->move_field_offset(-diff);
    if (next == NULL || next > end) return false;
    p = next;
  }
  return seen == stored && p == end;
}

}  // namespace tidesdb
