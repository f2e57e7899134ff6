/*
  key_codec: MariaDB key values -> byte strings that sort like the index.

  ## Format (one key = the concatenation of its parts, in index order)
  part      := [null marker] image           ; the whole part complemented if DESC
  null mark := 0x00 (NULL: no image follows) | 0x01 (a value follows)
               only for nullable parts
  image     := numbers, temporals, ENUM/SET, BIT: Field::sort_string() of
                 sort_length() bytes (big-endian, sign-flipped: memcmp order)
               strings with a collation: strnxfrm() weights of the first
                 key_part->length / mbmaxlen characters, padded to full width
                 (PAD SPACE collations pad with the space weight, so 'a' = 'a  ')
               binary strings: the bytes zero-padded to key_part->length, then
                 the value's length as 2 bytes big-endian ('a' < 'a\0')
  Every image of a part has the same length, so a key made of the first N parts
  is a byte prefix of every full key that starts with those N values.

  Secondary index entries append the primary key's encoding (or the 8-byte
  big-endian hidden row id) to the index key; the row column family is keyed by
  the primary key's encoding alone.
*/
#ifndef TIDESDB_KEY_CODEC_H
#define TIDESDB_KEY_CODEC_H

#include "tidesdb_server.h"
#include <string>

namespace tidesdb {

/* Appends the encoding of the first n_parts parts of key from record rec (which is
   table->record[0], record[1] or another buffer of the same layout). Returns true
   if any of those parts is NULL. */
bool encode_key_from_record(TABLE *table, const KEY *key, uint n_parts,
                            const uchar *rec, std::string *out);

/* Appends the encoding of a server key image (KeyTupleFormat) holding the parts
   named by keypart_map, restoring it through scratch_rec (a record-sized buffer).
   Returns the number of parts encoded. */
uint encode_key_from_image(TABLE *table, KEY *key, const uchar *image,
                           key_part_map keypart_map, uchar *scratch_rec,
                           std::string *out);

/* Appends the encoding of one key part (kp->field's value in rec; kp->length,
   kp->null_bit and HA_REVERSE_SORT say the format). Returns true if it is NULL. */
bool encode_key_part(const KEY_PART_INFO *kp, const uchar *rec, TABLE *table, std::string *out);

/* The largest encoding of the first n_parts parts of key. */
uint max_encoded_length(const KEY *key, uint n_parts);

/* Byte length of the first n_parts parts at the start of an encoded key (parts are
   fixed-width except NULL ones), or 0 if the key is shorter than that. */
size_t encoded_prefix_length(const KEY *key, uint n_parts, const uchar *enc, size_t len);

}  // namespace tidesdb

#endif
