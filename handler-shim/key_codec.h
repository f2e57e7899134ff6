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

  ## Extended keys (HTON_SUPPORTS_EXTENDED_KEYS)
  The server extends every non-unique secondary key of a table with a primary key
  by the primary key parts the key does not hold: KEY::ext_key_parts counts them
  too, key_part[user_defined_key_parts..] are copies of those primary key parts in
  primary key order (only whole-column parts: the server stops at the primary key's
  first prefix part and does not extend a key with a prefix part), and key images
  (index_read_map, records_in_range, ...) may cover the user parts plus the first
  k of them. Such an entry is keyed by the key's parts followed by EVERY primary key
  part, so a key image covering the user parts + k ext parts is encoded as the user
  parts, then the primary key parts up to the k-th ext part, in primary key order:
  a primary key part skipped as an ext part is a column of the key, whose value the
  image restores into the record through the key's own part. That is a byte prefix
  of the entries' keys, and entries sort by (user parts, ext parts) since a skipped
  primary key part repeats a user part's value.
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
   named by keypart_map (ext parts included, see Extended keys), restoring it
   through scratch_rec (a record-sized buffer). Returns the number of the key's
   parts (user + ext) encoded. */
uint encode_key_from_image(TABLE *table, KEY *key, const uchar *image,
                           key_part_map keypart_map, uchar *scratch_rec,
                           std::string *out);

/* Appends the encoding of one key part (kp->field's value in rec; kp->length,
   kp->null_bit and HA_REVERSE_SORT say the format). Returns true if it is NULL. */
bool encode_key_part(const KEY_PART_INFO *kp, const uchar *rec, TABLE *table, std::string *out);

/* Decoding an image back to the column (index entries' covered columns, see
   ha_tidesdb.cc Format). For integers, FLOAT, DOUBLE, DECIMAL, DATE, and the
   DATETIME/TIMESTAMP/TIME formats whose sort_string() is a reversible transform of
   the stored bytes: writes f's stored bytes (pack_length()) for image img
   (sort_length() bytes, any DESC complement undone) into to and returns true;
   false for every other type. A value whose image does not decode back to its own
   bytes (-0.0 and 0.0 share one image) is found by image_decodes_to_itself. */
bool decode_sort_image(const Field *f, const uchar *img, uchar *to);

/* True if f's value in rec (not NULL) is restored exactly by decode_sort_image
   from its image. */
bool image_decodes_to_itself(Field *f, const uchar *rec, TABLE *table);

/* The image (after the null marker; complemented if the part is DESC) of part
   `want` of parts[0..n) in the encoding enc[0..len), or null if that part is
   NULL or enc is shorter than the parts. */
const uchar *part_image(const KEY_PART_INFO *parts, uint n, uint want, const uchar *enc,
                        size_t len);

/* The largest encoding of the first n_parts parts of key. */
uint max_encoded_length(const KEY *key, uint n_parts);

/* Extended keys: the number of primary key parts an entry of secondary key `key`
   of table carries after its own parts that the first n_ext ext parts of key
   determine (see Extended keys above); 0 when n_ext is 0 or key is not extended
   (unique, SPATIAL, FULLTEXT, long-hash keys, the primary key, no primary key). */
uint ext_pk_parts(const TABLE *table, const KEY *key, uint n_ext);

/* Byte length of the first n_parts parts of key (ext parts included: then the
   primary key parts ext_pk_parts names) at the start of an encoded entry key (parts
   are fixed-width except NULL ones), or 0 if the key is shorter than that. */
size_t encoded_prefix_length(const TABLE *table, const KEY *key, uint n_parts, const uchar *enc,
                             size_t len);

}  // namespace tidesdb

#endif
