/* key_codec: see key_codec.h for the format. */
#include "key_codec.h"

namespace tidesdb {

static bool is_collated_string(const Field *f) {
  switch (f->real_type()) {
  case MYSQL_TYPE_VARCHAR:
  case MYSQL_TYPE_VAR_STRING:
  case MYSQL_TYPE_STRING:
  case MYSQL_TYPE_TINY_BLOB:
  case MYSQL_TYPE_MEDIUM_BLOB:
  case MYSQL_TYPE_LONG_BLOB:
  case MYSQL_TYPE_BLOB:
  case MYSQL_TYPE_GEOMETRY: /* a BLOB of the binary charset (a prefix part) */
    return true;
  default:
    return false;
  }
}

/* Bytes of the image of a part (without the null marker). */
static uint image_length(const KEY_PART_INFO *kp) {
  const Field *f = kp->field;
  if (is_collated_string(f)) {
    CHARSET_INFO *cs = f->charset();
    if (cs == &my_charset_bin) return kp->length + 2;
    return (uint)cs->strnxfrmlen(kp->length);
  }
  return f->sort_length();
}

uint max_encoded_length(const KEY *key, uint n_parts) {
  uint len = 0;
  for (uint i = 0; i < n_parts; i++) {
    const KEY_PART_INFO *kp = &key->key_part[i];
    len += (kp->null_bit ? 1 : 0) + image_length(kp);
  }
  return len;
}

/* Bytes of parts[0..n) starting at enc[pos], NULL parts taking only their marker:
   the position after them, or 0 if the key ends before. */
static size_t parts_end(const KEY_PART_INFO *parts, uint n, const uchar *enc, size_t len,
                        size_t pos) {
  for (uint i = 0; i < n; i++) {
    const KEY_PART_INFO *kp = &parts[i];
    if (kp->null_bit) {
      if (pos >= len) return 0;
      uchar marker = enc[pos];
      if (kp->key_part_flag & HA_REVERSE_SORT) marker = (uchar)~marker;
      pos++;
      if (marker == 0) continue; /* NULL: no image follows */
    }
    pos += image_length(kp);
    if (pos > len) return 0;
  }
  return pos;
}

uint ext_pk_parts(const TABLE *table, const KEY *key, uint n_ext) {
  uint pk_nr = table->s->primary_key;
  uint user = key->user_defined_key_parts;
  if (n_ext == 0 || pk_nr >= MAX_KEY || key == &table->key_info[pk_nr] ||
      key->ext_key_parts <= user || (key->flags & HA_NOSAME) ||
      tidesdb_compat::key_is_spatial(key) || tidesdb_compat::key_is_fulltext(key) ||
      key->algorithm == HA_KEY_ALG_LONG_HASH)
    return 0;
  const KEY *pk = &table->key_info[pk_nr];
  n_ext = std::min(n_ext, key->ext_key_parts - user);
  auto in_user_parts = [&](uint fieldnr) {
    for (uint p = 0; p < user; p++)
      if (key->key_part[p].fieldnr == fieldnr) return true;
    return false;
  };
  uint pk_parts = 0;
  for (uint i = 0; i < n_ext; i++) {
    uint fieldnr = key->key_part[user + i].fieldnr;
    uint j = pk_parts;
    /* Primary key parts skipped are columns of the key (as the server builds the
       ext parts): their values are in the image. Anything else ends the prefix
       here (never seen: the server's layout is always this one). */
    while (j < pk->user_defined_key_parts && pk->key_part[j].fieldnr != fieldnr &&
           in_user_parts(pk->key_part[j].fieldnr))
      j++;
    if (j == pk->user_defined_key_parts || pk->key_part[j].fieldnr != fieldnr) break;
    pk_parts = j + 1;
  }
  return pk_parts;
}

size_t encoded_prefix_length(const TABLE *table, const KEY *key, uint n_parts, const uchar *enc,
                             size_t len) {
  uint user = key->user_defined_key_parts;
  size_t pos = parts_end(key->key_part, std::min(n_parts, user), enc, len, 0);
  if (n_parts <= user || pos == 0) return pos;
  uint pk_parts = ext_pk_parts(table, key, n_parts - user);
  if (pk_parts == 0) return pos;
  return parts_end(table->key_info[table->s->primary_key].key_part, pk_parts, enc, len, pos);
}

/* Appends the image of string field f (already pointing at the record). */
static void encode_string(const KEY_PART_INFO *kp, Field *f, std::string *out) {
  CHARSET_INFO *cs = f->charset();
  String tmp;
  const char *ptr;
  size_t len;
  if (f->real_type() == MYSQL_TYPE_STRING && cs != &my_charset_bin) {
    /* CHAR: the stored bytes, padded with spaces, as Field_string::sort_string
       uses them. With a NO PAD collation the padding takes part in the order
       ('a' sorts after 'a\tb': space > tab); val_str() would trim it. */
    ptr = (const char *)f->ptr;
    len = f->field_length;
  } else {
    String *val = f->val_str(&tmp, &tmp);
    ptr = val ? val->ptr() : "";
    len = val ? val->length() : 0;
  }
  uint char_len = kp->length / cs->mbmaxlen;
  /* A prefix part (KEY(a(10))) keys on the first characters only. */
  size_t prefix_bytes = cs->charpos(ptr, ptr + len, char_len);
  if (prefix_bytes < len) len = prefix_bytes;
  if (len > kp->length) len = kp->length;

  size_t pos = out->size();
  if (cs == &my_charset_bin) {
    out->append(ptr, len);
    out->append(kp->length - len, '\0');
    out->push_back((char)((len >> 8) & 0xFF));
    out->push_back((char)(len & 0xFF));
    return;
  }
  size_t dst_len = cs->strnxfrmlen(kp->length);
  out->resize(pos + dst_len);
  /* As Field_string::sort_string: a character may expand to several weights
     ('ß' = 'ss'), so the weight budget is char_len * strxfrm_multiply. */
  size_t n = cs->strnxfrm((uchar *)&(*out)[pos], dst_len, char_len * cs->strxfrm_multiply,
                          (const uchar *)ptr, len,
                          MY_STRXFRM_PAD_WITH_SPACE | MY_STRXFRM_PAD_TO_MAXLEN);
  if (n < dst_len) memset(&(*out)[pos + n], 0, dst_len - n);
}

bool decode_sort_image(const Field *f, const uchar *img, uchar *to) {
  uint len = f->pack_length();
  if (f->sort_length() != len) return false;
  switch (f->real_type()) {
  case MYSQL_TYPE_TINY:
  case MYSQL_TYPE_SHORT:
  case MYSQL_TYPE_INT24:
  case MYSQL_TYPE_LONG:
  case MYSQL_TYPE_LONGLONG:
  case MYSQL_TYPE_YEAR:
    /* Big-endian image of the little-endian value, sign bit flipped if signed. */
    for (uint i = 0; i < len; i++) to[i] = img[len - 1 - i];
    if (!(f->flags & UNSIGNED_FLAG)) to[len - 1] ^= 0x80;
    return true;
  case MYSQL_TYPE_FLOAT:
  case MYSQL_TYPE_DOUBLE: {
    /* change_double_for_sort(): 0 is 0x80 00..; a negative number is its
       big-endian bytes complemented; a positive one has its top 16 bits raised by
       0x8000 + 2^(15 - exponent bits). */
    if (len != 4 && len != 8) return false;
    uchar be[8];
    bool zero = img[0] == 0x80;
    for (uint i = 1; i < len; i++) zero = zero && img[i] == 0;
    if (zero) {
      memset(to, 0, len);
      return true;
    }
    memcpy(be, img, len);
    if (!(img[0] & 0x80)) {
      for (uint i = 0; i < len; i++) be[i] ^= 0xFF;
    } else {
      uint16 top = (uint16)((be[0] << 8) | be[1]);
      top = (uint16)(top - 0x8000 - (len == 4 ? 1 << 7 : 1 << 4));
      be[0] = (uchar)(top >> 8);
      be[1] = (uchar)top;
    }
    for (uint i = 0; i < len; i++) to[i] = be[len - 1 - i];
    return true;
  }
  case MYSQL_TYPE_NEWDATE:
    for (uint i = 0; i < len; i++) to[i] = img[len - 1 - i];
    return true;
  case MYSQL_TYPE_NEWDECIMAL:
  case MYSQL_TYPE_DATETIME2:
  case MYSQL_TYPE_TIMESTAMP2:
  case MYSQL_TYPE_TIME2:
    /* Stored in a memcmp-ordered binary form: the image is the stored bytes. */
    memcpy(to, img, len);
    return true;
  default:
    return false;
  }
}

bool image_decodes_to_itself(Field *f, const uchar *rec, TABLE *table) {
  uint len = f->pack_length();
  uchar img[64], back[64];
  if (f->sort_length() != len || len > sizeof(img)) return false;
  my_ptrdiff_t diff = rec - table->record[0];
  f->move_field_offset(diff);
  f->sort_string(img, len);
  bool same = decode_sort_image(f, img, back) && memcmp(back, f->ptr, len) == 0;
  f->move_field_offset(-diff);
  return same;
}

const uchar *part_image(const KEY_PART_INFO *parts, uint n, uint want, const uchar *enc,
                        size_t len) {
  if (want >= n) return nullptr;
  size_t pos = parts_end(parts, want, enc, len, 0);
  if (want > 0 && pos == 0) return nullptr;
  const KEY_PART_INFO *kp = &parts[want];
  if (kp->null_bit) {
    if (pos >= len) return nullptr;
    uchar marker = enc[pos];
    if (kp->key_part_flag & HA_REVERSE_SORT) marker = (uchar)~marker;
    if (marker == 0) return nullptr;
    pos++;
  }
  if (pos + image_length(kp) > len) return nullptr;
  return enc + pos;
}

static bool encode_part(const KEY_PART_INFO *kp, const uchar *rec, TABLE *table,
                        std::string *out) {
  Field *f = kp->field;
  size_t start = out->size();
  bool is_null = false;
  my_ptrdiff_t diff = rec - table->record[0];
  f->move_field_offset(diff);
  if (kp->null_bit && f->is_null()) {
    out->push_back('\0');
    is_null = true;
  } else {
    if (kp->null_bit) out->push_back('\1');
    if (is_collated_string(f)) {
      encode_string(kp, f, out);
    } else {
      uint len = f->sort_length();
      size_t pos = out->size();
      out->resize(pos + len);
      f->sort_string((uchar *)&(*out)[pos], len);
    }
  }
  f->move_field_offset(-diff);
  if (kp->key_part_flag & HA_REVERSE_SORT) {
    for (size_t i = start; i < out->size(); i++) (*out)[i] = (char)~(uchar)(*out)[i];
  }
  return is_null;
}

bool encode_key_part(const KEY_PART_INFO *kp, const uchar *rec, TABLE *table, std::string *out) {
  return encode_part(kp, rec, table, out);
}

bool encode_key_from_record(TABLE *table, const KEY *key, uint n_parts, const uchar *rec,
                            std::string *out) {
  bool any_null = false;
  for (uint i = 0; i < n_parts; i++) {
    if (encode_part(&key->key_part[i], rec, table, out)) any_null = true;
  }
  return any_null;
}

uint encode_key_from_image(TABLE *table, KEY *key, const uchar *image, key_part_map keypart_map,
                           uchar *scratch_rec, std::string *out) {
  uint user = key->user_defined_key_parts;
  /* With extended keys the map may go on past the user parts into the ext parts. */
  uint all = std::max(user, key->ext_key_parts);
  uint n_parts = 0;
  uint image_len = 0;
  while (n_parts < all && (keypart_map & 1)) {
    image_len += key->key_part[n_parts].store_length;
    n_parts++;
    keypart_map >>= 1;
  }
  if (n_parts == 0) return 0;
  /* key_restore stores VARCHAR parts through Field::store, which under an UPDATE's
     CHECK_FIELD_WARN reports "Data truncated" when a bound is longer than the
     column (LIKE 'a%' pads its upper bound with max characters). The bound is the
     optimizer's, not the user's data: no note (InnoDB gives none). */
  THD *thd = table->in_use;
  enum_check_fields check_level = thd ? thd->count_cuted_fields : CHECK_FIELD_IGNORE;
  if (thd) thd->count_cuted_fields = CHECK_FIELD_IGNORE;
  key_restore(scratch_rec, image, key, image_len);
  if (thd) thd->count_cuted_fields = check_level;
  encode_key_from_record(table, key, std::min(n_parts, user), scratch_rec, out);
  if (n_parts > user) {
    /* Ext parts: the stored primary key suffix up to the last one (see Extended
       keys in key_codec.h), each part's value restored from the image by the ext
       part or, for a primary key column that is also a column of the key, by the
       key's own part. */
    uint pk_parts = ext_pk_parts(table, key, n_parts - user);
    encode_key_from_record(table, &table->key_info[table->s->primary_key], pk_parts,
                           scratch_rec, out);
  }
  return n_parts;
}

}  // namespace tidesdb
