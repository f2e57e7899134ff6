/* table_options: see table_options.h. */
#include "table_options.h"

namespace tidesdb {

void table_options_of(const TABLE_SHARE *share, tdb_table_options *out) {
  const ha_table_option_struct *o = share->option_struct;
  /* option_struct is always set for a table of this engine (the server parses the
     options with our list); the engine defaults cover a definition without it. */
  out->compression = o ? o->compression : TDB_COMPRESSION_NONE;
  out->compression_level = o ? (int32_t)o->compression_level : 3;
  out->bloom_bits_per_key = o ? (uint32_t)o->bloom_bits : 10;
  out->block_size = o ? (uint32_t)o->block_size : 4096;
  out->value_separation_threshold = o ? o->value_threshold : 0;
  uint enc = o ? o->encrypted : TIDESDB_ENCRYPTED_DEFAULT;
  out->encrypted = enc == TIDESDB_ENCRYPTED_YES ||
                   (enc == TIDESDB_ENCRYPTED_DEFAULT && tidesdb_encrypt_tables != TIDESDB_ENCRYPT_OFF);
  out->encryption_key_id = o ? (uint32_t)o->encryption_key_id : 1;
}

}  // namespace tidesdb
