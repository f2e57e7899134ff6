/*
  Engine-defined table options (CREATE TABLE ... COMPRESSION='ZSTD'): the values the
  server parsed from the table's definition (TABLE_SHARE::option_struct), and their
  translation into the engine's column family options.

  Each option is tied to a session variable (HA_TOPTION_SYSVAR): a table created
  without the option gets the variable's value, and the server writes that value
  into the table's definition when it is not the default, so SHOW CREATE TABLE
  always shows the options the table's column families were created with.
*/
#ifndef TIDESDB_TABLE_OPTIONS_H
#define TIDESDB_TABLE_OPTIONS_H

#include "tidesdb_server.h"
#include "tidesdb_ffi.h"

/* The server fills this struct (by the offsets of the option list). */
struct ha_table_option_struct {
  uint compression;             /* index in "NONE,ZSTD" = enum tdb_compression */
  ulonglong compression_level;  /* zstd level */
  ulonglong bloom_bits;         /* bloom filter bits per key, 0 = none */
  ulonglong block_size;         /* bytes of a data block before compression */
  ulonglong value_threshold;    /* value log threshold in bytes, 0 = never */
  uint encrypted;               /* index in "DEFAULT,YES,NO" (ENCRYPTED=, as InnoDB's) */
  ulonglong encryption_key_id;  /* ENCRYPTION_KEY_ID= (key management plugin's key id) */
};

/* tidesdb_encrypt_tables (as innodb_encrypt_tables): whether ENCRYPTED=DEFAULT
   tables are encrypted, and whether ENCRYPTED=NO is refused. */
enum tidesdb_encrypt_tables_mode { TIDESDB_ENCRYPT_OFF, TIDESDB_ENCRYPT_ON, TIDESDB_ENCRYPT_FORCE };
extern ulong tidesdb_encrypt_tables;
enum { TIDESDB_ENCRYPTED_DEFAULT, TIDESDB_ENCRYPTED_YES, TIDESDB_ENCRYPTED_NO };

namespace tidesdb {

/* The option list registered as handlerton::table_options (tidesdb_plugin.cc). */
extern ha_create_table_option table_option_list[];

/* The engine options of a table about to be created from share's definition. */
void table_options_of(const TABLE_SHARE *share, tdb_table_options *out);

}  // namespace tidesdb

#endif
