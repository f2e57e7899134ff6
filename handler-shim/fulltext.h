/*
  FULLTEXT indexes: the shim's side (see fulltext.cc). The tokenizer, postings
  format, ranking and query evaluation are in ffi/src/fulltext.rs; here a row's
  indexed columns become a document (bytes) and the server's FT_INFO interface
  becomes calls on a tdb_ft_result.
*/
#ifndef TIDESDB_FULLTEXT_H
#define TIDESDB_FULLTEXT_H

#include "tidesdb_server.h"
#include "tidesdb_ffi.h"
#include <string>

class ha_tidesdb;

namespace tidesdb {
inline bool is_fulltext(const KEY *key) { return key->algorithm == HA_KEY_ALG_FULLTEXT; }
/* The document of record rec for FULLTEXT key `key`: its non-NULL columns converted
   to UTF-8 (utf8mb4), each as u32 little-endian length + bytes. */
void ft_document(TABLE *table, const KEY *key, const uchar *rec, std::string *out);
/* tidesdb_ft_enable_stopword of the session (tidesdb_plugin.cc). */
bool ft_enable_stopword(THD *thd);
/* tidesdb_ft_ranking of the session is BM25 (tidesdb_plugin.cc). */
bool ft_ranking_bm25(THD *thd);
/* Fixes the settings (stopwords, token sizes) of the FULLTEXT indexes of table
   `name`, just created from `form`, as the session's settings say. */
int ft_fix_index_settings(THD *thd, const char *name, TABLE *form);
/* tidesdb_ft_user_stopword_table of the session and tidesdb_ft_server_stopword_table
   (tidesdb_plugin.cc): 'db/table' or NULL. */
const char *ft_user_stopword_table(THD *thd);
const char *ft_server_stopword_table();
/* The check function of both: refuses (ER_WRONG_VALUE_FOR_VAR) a name that is not
   a table whose first column is a VARCHAR named `value`, as InnoDB does. */
int ft_stopword_table_check(THD *thd, struct st_mysql_sys_var *var, void *save,
                            struct st_mysql_value *value);
extern struct st_mysql_information_schema ft_default_stopword_info;
int ft_default_stopword_init(void *p);
/* tidesdb_ft_aux_table (tidesdb_plugin.cc): 'db/table' whose FULLTEXT indexes
   INFORMATION_SCHEMA.TIDESDB_FT_INDEX_TABLE lists (a copy: '' if unset). */
std::string ft_aux_table();
/* Its check function: refuses (ER_WRONG_VALUE_FOR_VAR) a name that is not a TidesDB
   table with a FULLTEXT index, as InnoDB does for innodb_ft_aux_table. */
int ft_aux_table_check(THD *thd, struct st_mysql_sys_var *var, void *save,
                       struct st_mysql_value *value);
extern struct st_mysql_information_schema ft_index_table_info;
int ft_index_table_init(void *p);
}  // namespace tidesdb

/* INFORMATION_SCHEMA.TIDESDB_FT_DEFAULT_STOPWORD (like INNODB_FT_DEFAULT_STOPWORD)
   and TIDESDB_FT_INDEX_TABLE (like INNODB_FT_INDEX_TABLE: the words of the indexes
   of tidesdb_ft_aux_table): appended to the plugin library's declarations. */
#define TIDESDB_FT_INFORMATION_SCHEMA_PLUGINS                                              \
  {MYSQL_INFORMATION_SCHEMA_PLUGIN,                                                        \
   &tidesdb::ft_default_stopword_info,                                                     \
   "TIDESDB_FT_DEFAULT_STOPWORD",                                                          \
   "TidesDB for MariaDB authors",                                                          \
   "Default stopword list of TidesDB FULLTEXT indexes",                                    \
   PLUGIN_LICENSE_GPL,                                                                     \
   tidesdb::ft_default_stopword_init,                                                      \
   NULL,                                                                                   \
   0x0001,                                                                                 \
   NULL,                                                                                   \
   NULL,                                                                                   \
   "0.1.0",                                                                                \
   MariaDB_PLUGIN_MATURITY_BETA},                                                          \
  {MYSQL_INFORMATION_SCHEMA_PLUGIN,                                                        \
   &tidesdb::ft_index_table_info,                                                          \
   "TIDESDB_FT_INDEX_TABLE",                                                               \
   "TidesDB for MariaDB authors",                                                          \
   "Words of the FULLTEXT indexes of tidesdb_ft_aux_table",                                \
   PLUGIN_LICENSE_GPL,                                                                     \
   tidesdb::ft_index_table_init,                                                           \
   NULL,                                                                                   \
   0x0001,                                                                                 \
   NULL,                                                                                   \
   NULL,                                                                                   \
   "0.1.0",                                                                                \
   MariaDB_PLUGIN_MATURITY_BETA}

/* The FT_INFO the server holds for one MATCH ... AGAINST: the vtable first (the
   server calls through `please`), then the query's result. */
struct Tidesdb_ft_info {
  struct _ft_vft *please;
  ha_tidesdb *handler;
  tdb_ft_result *result;
  float relevance; /* of the row ft_read returned last */
};

#endif
