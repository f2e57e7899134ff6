/*
  FULLTEXT indexes: the handler's hooks and the server's FT_INFO interface.

  Each FULLTEXT key is an engine index of its own (a column family, t<id>.i<n>)
  holding postings; their format, the tokenizer and the ranking are documented in
  ffi/src/fulltext.rs. A row change sends the engine the row's document (its
  indexed columns in UTF-8) in TDB_OP_FT_PUT / TDB_OP_FT_DELETE ops of the same
  tdb_apply as the row, so the postings change atomically with it (statement and
  transaction rollback, savepoints, recovery all come with that).

  MATCH ... AGAINST: Item_func_match::init_search calls ft_init_ext, which runs the
  whole query in the engine (postings only, never a table scan) and keeps its
  result: the matching primary keys with their relevance, sorted by relevance when
  the server asks (FT_SORTED), else by primary key. With the FULLTEXT index as the
  access method the server then calls ft_init + ft_read (one row per result);
  otherwise (MATCH in the select list of another plan) it asks find_relevance for
  each row it reads, answered from the result by primary key.
*/
#include "ha_tidesdb.h"
#include "errors.h"
#include <algorithm>
#include <sql_base.h>
#include <log.h>
#include <sql_parse.h>

using namespace tidesdb;

/* True if collation `cs` compares the UTF-8 strings `x` and `y` equal. */
static bool collates_equal(CHARSET_INFO *cs, const char *x, const char *y) {
  String a, b;
  uint errors = 0, errors2 = 0;
  a.copy(x, strlen(x), &my_charset_utf8mb4_bin, cs, &errors);
  b.copy(y, strlen(y), &my_charset_utf8mb4_bin, cs, &errors2);
  return errors == 0 && errors2 == 0 &&
         cs->strnncoll((const uchar *)a.ptr(), a.length(), (const uchar *)b.ptr(), b.length()) ==
             0;
}

/* How the words of a column with collation `cs` fold beyond lower case, as
   InnoDB's FTS, which compares words with the column's collation: accents if
   'é' = 'e' (under utf8mb4_general_ci, AGAINST ('cafe') finds 'café'), and
   'ß' as 'ss' if the collation expands it (the UCA ones). */
enum Ft_fold { FOLD_CASE = 0, FOLD_ACCENTS = 1, FOLD_SHARP_S = 2 };
static int ft_fold_of(CHARSET_INFO *cs) {
  if (cs->state & MY_CS_BINSORT) return FOLD_CASE;
  int fold = FOLD_CASE;
  if (collates_equal(cs, "\xC3\xA9", "e")) fold |= FOLD_ACCENTS;
  if (collates_equal(cs, "\xC3\x9F", "ss")) fold |= FOLD_SHARP_S;
  return fold;
}

/* The rank of each ASCII character under collation `cs` (equal characters share
   one), the order InnoDB's FTS index keeps its words in; NULL for a charset whose
   characters are not single bytes (byte order then). Per thread, for the last
   collation asked. */
static const uint8_t *ft_word_order(CHARSET_INFO *cs) {
  if (cs->mbminlen != 1) return NULL;
  thread_local CHARSET_INFO *cached = NULL;
  thread_local uint8_t rank[128];
  if (cached == cs) return rank;
  uchar by_weight[128];
  for (uint c = 0; c < 128; c++) by_weight[c] = (uchar)c;
  auto cmp = [cs](uchar a, uchar b) { return cs->strnncoll(&a, 1, &b, 1) < 0; };
  std::stable_sort(by_weight, by_weight + 128, cmp);
  uint8_t r = 0;
  for (uint i = 0; i < 128; i++) {
    if (i > 0 && cmp(by_weight[i - 1], by_weight[i])) r++;
    rank[by_weight[i]] = r;
  }
  cached = cs;
  return rank;
}

/* InnoDB's FTS compares words with the column's collation, so under one that
   sorts by code point (utf8mb4_bin, binary) 'Hello' and 'hello' are two words. */
static bool ft_case_sensitive(CHARSET_INFO *cs) { return cs->state & MY_CS_BINSORT; }

/* FOLD_ACCENTS: replaces each character of the UTF-8 text by its utf8mb4_general_ci weight
   (a code point: the upper-case letter without accents, 'é' -> 'E'); the engine
   lower-cases the words afterwards. One character for one, so word boundaries
   and positions stay (FOLD_SHARP_S: 'ß' becomes two, inside its word). */
static bool ascii_weights_are_case_only(const MY_CASEFOLD_INFO *cf) {
  const uint16 *page = cf->simple_weight[0];
  if (!page) return true;
  for (uint c = 0; c < 0x80; c++)
    if (page[c] != (c >= 'a' && c <= 'z' ? c - ('a' - 'A') : c)) return false;
  return true;
}

static void fold_accents(String *utf8, int fold) {
  if (!(fold & FOLD_ACCENTS)) return;
  MY_CASEFOLD_INFO *cf = my_charset_utf8mb4_general_ci.casefold;
  if (!cf || !cf->simple_weight) return;
  /* The ASCII weights differ from the characters only in case, which the engine folds
     afterwards: a text of ASCII alone (most text) is left as it is. */
  static const bool ascii_case_only = ascii_weights_are_case_only(cf);
  if (ascii_case_only) {
    const uchar *q = (const uchar *)utf8->ptr(), *qend = q + utf8->length();
    while (q < qend && *q < 0x80) q++;
    if (q == qend) return;
  }
  CHARSET_INFO *cs = &my_charset_utf8mb4_bin;
  String out;
  out.set_charset(cs);
  const uchar *p = (const uchar *)utf8->ptr(), *end = p + utf8->length();
  while (p < end) {
    my_wc_t wc;
    int n = cs->cset->mb_wc(cs, &wc, p, end);
    if (n <= 0) { /* not UTF-8 (cannot happen after the conversion): keep the byte */
      out.append((const char *)p, 1);
      p++;
      continue;
    }
    if (wc == 0xDF && (fold & FOLD_SHARP_S)) {
      out.append("SS", 2);
      p += n;
      continue;
    }
    if (wc <= cf->maxchar) {
      const uint16 *page = cf->simple_weight[wc >> 8];
      if (page) wc = page[wc & 0xFF];
    }
    uchar buf[4];
    int m = cs->cset->wc_mb(cs, wc, buf, buf + sizeof(buf));
    if (m > 0)
      out.append((const char *)buf, m);
    else
      out.append((const char *)p, n);
    p += n;
  }
  utf8->swap(out);
}

void tidesdb::ft_document(TABLE *table, const KEY *key, const uchar *rec, std::string *out) {
  out->clear();
  my_ptrdiff_t diff = rec - table->record[0];
  String value, utf8;
  for (uint p = 0; p < key->user_defined_key_parts; p++) {
    Field *f = table->field[key->key_part[p].fieldnr - 1];
    if (f->is_null_in_record(rec)) continue;
    f->move_field_offset(diff);
    String *v = f->val_str(&value, &value);
    f->move_field_offset(-diff);
    if (!v) continue;
    uint errors;
    utf8.copy(v->ptr(), v->length(), v->charset(), &my_charset_utf8mb4_bin, &errors);
    fold_accents(&utf8, ft_fold_of(f->charset()));
    uchar len[4];
    int4store(len, (uint32)utf8.length() |
                       (ft_case_sensitive(f->charset()) ? TDB_FT_DOC_CASE_SENSITIVE : 0));
    out->append((const char *)len, 4);
    out->append(utf8.ptr(), utf8.length());
  }
}

static tdb_op ft_op(uint32_t kind, uint32_t index, const std::string &pk,
                    const std::string &doc) {
  tdb_op op;
  op.index = index;
  op.kind = kind;
  op.lock = 0; /* the row's lock covers its postings */
  op.key = (const uint8_t *)pk.data();
  op.key_len = pk.size();
  op.value = (const uint8_t *)doc.data();
  op.value_len = doc.size();
  op.unique_len = 0;
  return op;
}

bool ha_tidesdb::ft_ops(uint k, const uchar *old_rec, const std::string &old_pk,
                        const uchar *new_rec, const std::string &new_pk,
                        std::vector<tdb_op> *ops, std::vector<uint> *op_keys) {
  const KEY *key = &table->key_info[k];
  if (!is_fulltext(key)) return false;
  /* Sized once, before the first op points into it. */
  if (m_ft_docs.size() < 2 * (size_t)table->s->keys) m_ft_docs.resize(2 * table->s->keys);
  std::string &old_doc = m_ft_docs[2 * k], &new_doc = m_ft_docs[2 * k + 1];
  if (old_rec) ft_document(table, key, old_rec, &old_doc);
  if (new_rec) ft_document(table, key, new_rec, &new_doc);
  if (old_rec && new_rec && old_doc == new_doc && old_pk == new_pk) return true;
  if (old_rec) {
    ops->push_back(ft_op(TDB_OP_FT_DELETE, engine_index(k), old_pk, old_doc));
    op_keys->push_back(k);
  }
  if (new_rec) {
    ops->push_back(ft_op(TDB_OP_FT_PUT, engine_index(k), new_pk, new_doc));
    op_keys->push_back(k);
  }
  return true;
}

bool ha_tidesdb::ft_check_row(uint k, const uchar *rec, std::vector<ha_rows> *expected) {
  const KEY *key = &table->key_info[k];
  if (!is_fulltext(key)) return false;
  std::string doc;
  ft_document(table, key, rec, &doc);
  (*expected)[k] += tdb_ft_document_terms(trx(), m_tbl, engine_index(k),
                                          (const uint8_t *)doc.data(), doc.size());
  return true;
}

/* ------------------------------------------------------------ FT_INFO vtable */

static int ft_vft_read_next(FT_INFO *info, char *record) {
  Tidesdb_ft_info *fi = reinterpret_cast<Tidesdb_ft_info *>(info);
  return fi->handler->ft_read((uchar *)record);
}

static float ft_vft_find_relevance(FT_INFO *info, uchar *record, uint length) {
  Tidesdb_ft_info *fi = reinterpret_cast<Tidesdb_ft_info *>(info);
  /* length != 0: a text to search without an index, which HA_CAN_FULLTEXT_EXT
     makes the server refuse (as for InnoDB). */
  if (length) return 0.0f;
  return fi->handler->ft_relevance_of(fi, record);
}

static void ft_vft_close_search(FT_INFO *info) {
  Tidesdb_ft_info *fi = reinterpret_cast<Tidesdb_ft_info *>(info);
  tdb_ft_result_free(fi->result);
  my_free(fi);
}

static float ft_vft_get_relevance(FT_INFO *info) {
  return reinterpret_cast<Tidesdb_ft_info *>(info)->relevance;
}

static void ft_vft_reinit_search(FT_INFO *info) {
  tdb_ft_result_rewind(reinterpret_cast<Tidesdb_ft_info *>(info)->result);
}

static struct _ft_vft tidesdb_ft_vft = {ft_vft_read_next, ft_vft_find_relevance,
                                        ft_vft_close_search, ft_vft_get_relevance,
                                        ft_vft_reinit_search};

/* ----------------------------------------------------------- handler methods */

int ha_tidesdb::ft_fetch_document(uint k, const uint8_t *pk, size_t pk_len, std::string *doc) {
  const uint8_t *value;
  size_t len;
  int st = tdb_get(trx(), m_tbl, 0, pk, pk_len, &value, &len);
  if (st == TDB_NOT_FOUND) return 1;
  if (st) return fail(st);
  /* record[1] as scratch: a query is set up before the statement reads rows. */
  std::string saved_pk = m_last_pk;
  m_last_pk.assign((const char *)pk, pk_len);
  int err = unpack_row(table->record[1], value, len);
  m_last_pk.swap(saved_pk);
  if (err) return err;
  ft_document(table, &table->key_info[k], table->record[1], doc);
  return 0;
}

namespace {
/* What the engine's document callback needs during one tdb_ft_search. */
struct Ft_fetch_ctx {
  ha_tidesdb *handler;
  uint key;
  std::string doc;
};

int ft_fetch_doc(void *ctx, const uint8_t *pk, size_t pk_len, const uint8_t **doc,
                 size_t *doc_len) {
  Ft_fetch_ctx *c = static_cast<Ft_fetch_ctx *>(ctx);
  int rc = c->handler->ft_fetch_document(c->key, pk, pk_len, &c->doc);
  if (rc) return rc == 1 ? 1 : -1;
  *doc = (const uint8_t *)c->doc.data();
  *doc_len = c->doc.size();
  return 0;
}
}  // namespace

FT_INFO *ha_tidesdb::ft_init_ext(uint flags, uint inx, String *key) {
  if (inx >= table->s->keys || !is_fulltext(&table->key_info[inx])) {
    my_error(ER_FT_MATCHING_KEY_NOT_FOUND, MYF(0));
    return NULL;
  }
  String utf8;
  uint errors;
  utf8.copy(key->ptr(), key->length(), key->charset(), &my_charset_utf8mb4_bin, &errors);
  /* Query words fold as the documents' (the index's first column decides). */
  const KEY *ft_key = &table->key_info[inx];
  CHARSET_INFO *cs = table->field[ft_key->key_part[0].fieldnr - 1]->charset();
  fold_accents(&utf8, ft_fold_of(cs));
  uint32_t search_flags = (flags & (FT_BOOL | FT_SORTED | FT_EXPAND)) |
                          (ft_case_sensitive(cs) ? TDB_FT_CASE_SENSITIVE : 0) |
                          (ft_key->user_defined_key_parts == 1 ? TDB_FT_SINGLE_COLUMN : 0) |
                          (ft_ranking_bm25(ha_thd()) ? TDB_FT_RANKING_BM25 : 0);
  /* Relevance counts the table's rows, as InnoDB's (its row count statistic). */
  info(HA_STATUS_VARIABLE | HA_STATUS_NO_LOCK);
  Ft_fetch_ctx fetch_ctx{this, inx, std::string()};
  tdb_ft_result *res = nullptr;
  int syntax_error = 0;
  int st = tdb_ft_search(trx(), m_tbl, engine_index(inx), (const uint8_t *)utf8.ptr(),
                         utf8.length(), search_flags, stats.records, ft_word_order(cs),
                         ft_fetch_doc, &fetch_ctx, &res, &syntax_error);
  if (st && syntax_error) {
    /* As InnoDB reports them: its FTS parser's message, its errors for the limits. */
    if (syntax_error == 1)
      my_printf_error(ER_PARSE_ERROR, "%s", MYF(0), tdb_last_error());
    else
      my_error(syntax_error == 2 ? HA_ERR_OUT_OF_MEM : HA_ERR_FTS_TOO_MANY_WORDS_IN_PHRASE,
               MYF(0));
    return NULL;
  }
  if (st) {
    my_error(ER_GET_ERRNO, MYF(0), fail(st), "TidesDB");
    return NULL;
  }
  Tidesdb_ft_info *fi = (Tidesdb_ft_info *)my_malloc(PSI_NOT_INSTRUMENTED,
                                                     sizeof(Tidesdb_ft_info), MYF(MY_WME));
  if (!fi) {
    tdb_ft_result_free(res);
    return NULL;
  }
  fi->please = &tidesdb_ft_vft;
  fi->handler = this;
  fi->result = res;
  fi->relevance = 0.0f;
  return reinterpret_cast<FT_INFO *>(fi);
}

int ha_tidesdb::ft_init() {
  if (ft_handler) tdb_ft_result_rewind(reinterpret_cast<Tidesdb_ft_info *>(ft_handler)->result);
  return 0;
}

int ha_tidesdb::ft_read(uchar *buf) {
  Tidesdb_ft_info *fi = reinterpret_cast<Tidesdb_ft_info *>(ft_handler);
  if (!fi) return HA_ERR_END_OF_FILE;
  for (;;) {
    const uint8_t *pk;
    size_t pk_len;
    float rel;
    int st = tdb_ft_result_next(fi->result, &pk, &pk_len, &rel);
    if (st == TDB_END) return HA_ERR_END_OF_FILE;
    if (st) return fail(st);
    int err = read_row_by_pk(buf, pk, pk_len);
    /* A locking read finds the latest rows: one deleted since the snapshot the
       postings were read in is skipped. */
    if (err == HA_ERR_KEY_NOT_FOUND) continue;
    if (!err) fi->relevance = rel;
    return err;
  }
}

float ha_tidesdb::ft_relevance_of(Tidesdb_ft_info *fi, const uchar *record) {
  std::string pk;
  if (m_hidden_pk)
    pk = m_last_pk;
  else
    encode_pk(record, &pk);
  return tdb_ft_result_relevance(fi->result, (const uint8_t *)pk.data(), pk.size());
}

/* ------------------------------------------------- user stopword tables */

namespace {
/* Keeps a failed open of a stopword table out of the statement's diagnostics: the
   caller reports it its own way (InnoDB: ER_WRONG_VALUE_FOR_VAR, or a fallback). */
struct Quiet_errors : public Internal_error_handler {
  bool handle_condition(THD *, uint, const char *, Sql_condition::enum_warning_level *,
                        const char *, Sql_condition **) override {
    return true;
  }
};

/* Reads stopword table `name` ('db/table') into `packed` (each word as u32 LE length
   + UTF-8 bytes; NULL: only check it). False, with the reason in the error log as
   InnoDB logs it, when it is not a table whose first column is a VARCHAR `value`. */
bool read_stopword_table(THD *thd, const char *name, std::string *packed,
                         bool check_access = false) {
  const char *slash = strchr(name, '/');
  if (!slash || slash == name || !slash[1]) {
    sql_print_error("TidesDB: stopword table %s must be named as 'db/table'", name);
    return false;
  }
  std::string db(name, slash - name), tn(slash + 1);
  LEX_CSTRING ldb = {db.c_str(), db.size()}, ltn = {tn.c_str(), tn.size()};
  TABLE_LIST tl;
  tl.init_one_table(&ldb, &ltn, nullptr, TL_READ);
  /* Its words become searchable through every index built with it: naming it needs
     SELECT on it (InnoDB does not ask). */
  if (check_access && check_table_access(thd, SELECT_ACL, &tl, false, 1, false)) return false;
  Quiet_errors quiet;
  bool ok = false;
  start_new_trans new_trans(thd);
  thd->push_internal_handler(&quiet);
  bool open_failed = open_system_tables_for_read(thd, &tl);
  thd->pop_internal_handler();
  if (open_failed) {
    sql_print_error("TidesDB: user stopword table %s does not exist.", name);
  } else {
    TABLE *t = tl.table;
    Field *f = t->s->fields ? t->field[0] : nullptr;
    if (!f || !tidesdb_compat::ident_eq(f->field_name.str, "value"))
      sql_print_error("TidesDB: invalid column name for stopword table %s. Its first column "
                      "must be named as 'value'.",
                      name);
    else if (f->real_type() != MYSQL_TYPE_VARCHAR)
      sql_print_error("TidesDB: invalid column type for stopword table %s. Its first column "
                      "must be of varchar type",
                      name);
    else
      ok = true;
    if (ok && packed) {
      handler *h = t->file;
      int rc = h->ha_rnd_init(true);
      String buf, utf8;
      uint errors;
      while (!rc && !(rc = h->ha_rnd_next(t->record[0]))) {
        if (f->is_null()) continue;
        String *v = f->val_str(&buf);
        utf8.copy(v->ptr(), v->length(), v->charset(), &my_charset_utf8mb4_bin, &errors);
        uint32_t len = utf8.length();
        packed->append((const char *)&len, 4); /* little-endian: the only hosts built */
        packed->append(utf8.ptr(), len);
      }
      if (rc != HA_ERR_END_OF_FILE) {
        sql_print_error("TidesDB: cannot read stopword table %s (error %d)", name, rc);
        ok = false;
      }
      h->ha_rnd_end();
    }
    thd->commit_whole_transaction_and_close_tables();
  }
  new_trans.restore_old_transaction();
  return ok;
}
}  // namespace

int tidesdb::ft_stopword_table_check(THD *thd, struct st_mysql_sys_var *, void *save,
                                     struct st_mysql_value *value) {
  char buff[STRING_BUFFER_USUAL_SIZE];
  int len = sizeof(buff);
  const char *name = value->val_str(value, buff, &len);
  if (name && !read_stopword_table(thd, name, nullptr, true)) return 1;
  *static_cast<const char **>(save) = name == buff ? thd_strmake(thd, name, len) : name;
  return 0;
}

/* The stopword list of an index built now, as InnoDB chooses it: the session's
   table, else the server's, else the default list (packed->empty() and false). */
static bool chosen_stopwords(THD *thd, std::string *packed) {
  for (const char *name : {ft_user_stopword_table(thd), ft_server_stopword_table()}) {
    if (name && *name) {
      packed->clear();
      if (read_stopword_table(thd, name, packed)) return true;
    }
  }
  packed->clear();
  return false;
}

/* ------------------------------------------------- settings of a new index */

int tidesdb::ft_fix_index_settings(THD *thd, const char *name, TABLE *form) {
  bool any = false;
  for (uint k = 0; k < form->s->keys; k++) any |= is_fulltext(&form->key_info[k]);
  if (!any) return 0;
  tdb_table *t = nullptr;
  tdb_trx *trx = tdb_trx_new();
  int st = trx ? tdb_table_open(name, &t) : TDB_INTERNAL;
  if (!st) st = tdb_trx_begin(trx, TDB_ISO_READ_COMMITTED);
  /* Engine index numbers: the primary key is 0, the other keys 1.. in order. */
  uint32_t next = 1;
  std::string words;
  bool enable = ft_enable_stopword(thd), own_list = enable && chosen_stopwords(thd, &words);
  bool hidden_pk = form->s->primary_key >= MAX_KEY;
  for (uint k = 0; k < form->s->keys && !st; k++) {
    if (!hidden_pk && k == form->s->primary_key) continue;
    uint32_t index = next++;
    if (!is_fulltext(&form->key_info[k])) continue;
    st = tdb_ft_index_settings(trx, t, index, enable ? 1 : 0,
                               own_list ? (const uint8_t *)words.data() : nullptr, words.size());
  }
  if (!st) st = tdb_trx_commit(trx);
  int err = 0;
  if (st) {
    my_printf_error(ER_GET_ERRNO, "TidesDB: cannot record the FULLTEXT settings: %s", MYF(0),
                    tdb_last_error());
    err = HA_ERR_GENERIC;
  }
  if (t) tdb_table_close(t);
  if (trx) tdb_trx_free(trx);
  return err;
}

/* ------------------------------ INFORMATION_SCHEMA.TIDESDB_FT_DEFAULT_STOPWORD */

#include <sql_i_s.h>
#include <sql_show.h>
#include <sql_table.h>
#include <sql_parse.h>

namespace Show {
static ST_FIELD_INFO ft_default_stopword_fields[] = {Column("value", Varchar(18), NOT_NULL),
                                                      CEnd()};
}  // namespace Show

static int ft_default_stopword_fill(THD *thd, TABLE_LIST *tables, COND *) {
  TABLE *t = tables->table;
  const uint8_t *word;
  for (size_t i = 0; size_t len = tdb_ft_default_stopword(i, &word); i++) {
    t->field[0]->store((const char *)word, len, system_charset_info);
    if (schema_table_store_record(thd, t)) return 1;
  }
  return 0;
}

struct st_mysql_information_schema tidesdb::ft_default_stopword_info = {
    MYSQL_INFORMATION_SCHEMA_INTERFACE_VERSION};

int tidesdb::ft_default_stopword_init(void *p) {
  ST_SCHEMA_TABLE *schema = (ST_SCHEMA_TABLE *)p;
  schema->fields_info = Show::ft_default_stopword_fields;
  schema->fill_table = ft_default_stopword_fill;
  return 0;
}

/* --------------------------------- INFORMATION_SCHEMA.TIDESDB_FT_INDEX_TABLE */

/* 'db/table' as the engine names the table: "./db/table", both parts in the
   server's file name encoding. False if `name` is not of that form. */
static bool aux_table_path(const char *name, std::string *path) {
  const char *slash = strchr(name, '/');
  if (!slash || slash == name || !slash[1] || strchr(slash + 1, '/')) return false;
  std::string db(name, slash - name);
  char db_enc[FN_REFLEN], table_enc[FN_REFLEN];
  tablename_to_filename(db.c_str(), db_enc, sizeof(db_enc));
  tablename_to_filename(slash + 1, table_enc, sizeof(table_enc));
  *path = std::string("./") + db_enc + "/" + table_enc;
  return true;
}

int tidesdb::ft_aux_table_check(THD *thd, struct st_mysql_sys_var *, void *save,
                                struct st_mysql_value *value) {
  char buff[STRING_BUFFER_USUAL_SIZE];
  int len = sizeof(buff);
  const char *name = value->val_str(value, buff, &len);
  std::string path;
  /* As innodb_ft_aux_table: only a table with a FULLTEXT index (or '' / NULL). */
  if (name && *name && (!aux_table_path(name, &path) || !tdb_ft_table_has_index(path.c_str())))
    return 1;
  *static_cast<const char **>(save) = name == buff ? thd_strmake(thd, name, len) : name;
  return 0;
}

namespace Show {
static ST_FIELD_INFO ft_index_table_fields[] = {
    Column("KEY_NAME", Varchar(NAME_CHAR_LEN), NOT_NULL),
    Column("WORD", Varchar(337), NOT_NULL),
    Column("DOC_COUNT", ULonglong(), NOT_NULL),
    Column("OCCURRENCES", ULonglong(), NOT_NULL),
    CEnd()};
}  // namespace Show

namespace {
struct Ft_index_table_fill {
  THD *thd;
  TABLE *table;
};

int store_ft_word(void *ctx, const char *key_name, size_t key_name_len, const uint8_t *word,
                  size_t word_len, uint64_t doc_count, uint64_t occurrences) {
  Ft_index_table_fill *f = static_cast<Ft_index_table_fill *>(ctx);
  TABLE *t = f->table;
  t->field[0]->store(key_name, key_name_len, system_charset_info);
  t->field[1]->store((const char *)word, word_len, &my_charset_utf8mb4_bin);
  t->field[2]->store((longlong)doc_count, true);
  t->field[3]->store((longlong)occurrences, true);
  return schema_table_store_record(f->thd, t) ? 1 : 0;
}
}  // namespace

static int ft_index_table_fill(THD *thd, TABLE_LIST *tables, COND *) {
  /* InnoDB's INNODB_FT_INDEX_TABLE asks the same. */
  if (check_global_access(thd, PROCESS_ACL)) return 0;
  std::string name = ft_aux_table(), path;
  if (name.empty() || !aux_table_path(name.c_str(), &path)) return 0;
  Ft_index_table_fill fill = {thd, tables->table};
  int st = tdb_ft_index_words(path.c_str(), store_ft_word, &fill);
  if (st == TDB_NO_SUCH_TABLE) return 0; /* dropped since it was named */
  if (st && !thd->is_error())
    my_printf_error(ER_GET_ERRNO, "TidesDB: cannot read the FULLTEXT indexes of %s: %s", MYF(0),
                    name.c_str(), tdb_last_error());
  return st ? 1 : 0;
}

struct st_mysql_information_schema tidesdb::ft_index_table_info = {
    MYSQL_INFORMATION_SCHEMA_INTERFACE_VERSION};

int tidesdb::ft_index_table_init(void *p) {
  ST_SCHEMA_TABLE *schema = (ST_SCHEMA_TABLE *)p;
  schema->fields_info = Show::ft_index_table_fields;
  schema->fill_table = ft_index_table_fill;
  return 0;
}
