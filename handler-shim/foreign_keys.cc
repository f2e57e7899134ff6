/* foreign_keys: see foreign_keys.h; the catalog and its format are in
   ffi/src/foreign_keys.rs. */
#include "foreign_keys.h"
#include "errors.h"
#include "fulltext.h"
#include "ha_tidesdb.h"
#include "key_codec.h"
#include "spatial.h"
#include "wsrep.h"
#include "sql_table.h"
#include <algorithm>
#include <deque>
#include <string>
#include <vector>

using namespace tidesdb;

namespace {

/* A list from tdb_fk_list, freed with its owner. */
struct Fk_list {
  tdb_fk_list *list = nullptr;
  ~Fk_list() { tdb_fk_list_free(list); }
  uint32_t count() const { return tdb_fk_list_count(list); }
  const tdb_fk_info *at(uint32_t i) const { return tdb_fk_list_get(list, i); }
};

bool is_temporary_path(const char *name) { return name[0] == '/'; }

/* "db/t" (a path without "./") -> db and table names as the user writes them. */
void split_path(const char *path, std::string *db, std::string *table) {
  if (path[0] == '.' && path[1] == '/') path += 2;
  const char *slash = strrchr(path, '/');
  std::string db_enc = slash ? std::string(path, slash - path) : std::string();
  const char *tbl_enc = slash ? slash + 1 : path;
  char buf[NAME_LEN * 4 + 1];
  filename_to_tablename(db_enc.c_str(), buf, sizeof buf, true);
  *db = buf;
  /* An ALTER's #sql name is shown as it is (as InnoDB shows it). */
  if (strncmp(tbl_enc, "#sql", 4) == 0) {
    *table = tbl_enc;
    return;
  }
  filename_to_tablename(tbl_enc, buf, sizeof buf, true);
  *table = buf;
}

void append_ident(std::string *out, const char *name) {
  out->push_back('`');
  for (const char *p = name; *p; p++) {
    if (*p == '`') out->push_back('`');
    out->push_back(*p);
  }
  out->push_back('`');
}

void append_columns(std::string *out, const char *const *cols, uint32_t n) {
  out->push_back('(');
  for (uint32_t i = 0; i < n; i++) {
    if (i) out->append(", ");
    append_ident(out, cols[i]);
  }
  out->push_back(')');
}

const char *rule_text(uint32_t rule) {
  switch (rule) {
  case FK_OPTION_CASCADE: return "CASCADE";
  case FK_OPTION_SET_NULL: return "SET NULL";
  case FK_OPTION_NO_ACTION: return "NO ACTION";
  case FK_OPTION_SET_DEFAULT: return "SET DEFAULT";
  default: return nullptr; /* RESTRICT: the default, not shown (as InnoDB) */
  }
}

/* "CONSTRAINT `n` FOREIGN KEY (`a`) REFERENCES `p` (`x`) ON DELETE ...", as InnoDB
   prints it (the parent's database only when it is not the child's). */
std::string constraint_text(const tdb_fk_info *fk) {
  std::string child_db, child_tbl, parent_db, parent_tbl;
  split_path(fk->child, &child_db, &child_tbl);
  split_path(fk->parent, &parent_db, &parent_tbl);
  std::string s = "CONSTRAINT ";
  append_ident(&s, fk->name);
  s.append(" FOREIGN KEY ");
  append_columns(&s, fk->child_cols, fk->n_cols);
  s.append(" REFERENCES ");
  if (parent_db != child_db) {
    append_ident(&s, parent_db.c_str());
    s.push_back('.');
  }
  append_ident(&s, parent_tbl.c_str());
  s.push_back(' ');
  append_columns(&s, fk->parent_cols, fk->n_cols);
  if (const char *r = rule_text(fk->on_delete)) s.append(" ON DELETE ").append(r);
  if (const char *r = rule_text(fk->on_update)) s.append(" ON UPDATE ").append(r);
  return s;
}

/* The check's error text: "`db`.`child`, CONSTRAINT ...". */
std::string violation_text(const tdb_fk_info *fk) {
  std::string db, tbl;
  split_path(fk->child, &db, &tbl);
  std::string s;
  append_ident(&s, db.c_str());
  s.push_back('.');
  append_ident(&s, tbl.c_str());
  s.append(", ").append(constraint_text(fk));
  return s;
}

std::string type_sig(const Field *f) {
  char buf[64];
  switch (f->real_type()) {
  case MYSQL_TYPE_VARCHAR:
  case MYSQL_TYPE_VAR_STRING:
  case MYSQL_TYPE_STRING:
  case MYSQL_TYPE_TINY_BLOB:
  case MYSQL_TYPE_MEDIUM_BLOB:
  case MYSQL_TYPE_LONG_BLOB:
  case MYSQL_TYPE_BLOB:
    /* Strings pair whatever their length when the collation is the same (as in
       InnoDB); the key codec pads both sides to the index's width. */
    if (f->charset() == &my_charset_bin) return "bin";
    snprintf(buf, sizeof buf, "str:%u", f->charset()->number);
    return buf;
  default:
    snprintf(buf, sizeof buf, "%d:%u:%d:%u", (int)f->real_type(), f->pack_length(),
             (f->flags & UNSIGNED_FLAG) ? 1 : 0, f->decimals());
    return buf;
  }
}

Field *field_by_name(TABLE *table, const char *name) {
  for (Field **fp = table->field; *fp; fp++)
    if (tidesdb_compat::ident_eq((*fp)->field_name.str, name)) return *fp;
  return nullptr;
}

/* Encodes columns cols of record rec in the format of the index parts `parts` of
   the other side. Returns 1 when a column is NULL (no check), 2 when a value
   cannot occur in that index (a string longer than its column), -1 on a missing
   column, 0 when *out holds the prefix. */
int encode_for(TABLE *table, const char *const *cols, const tdb_fk_part *parts, uint32_t n,
               const uchar *rec, std::string *out) {
  out->clear();
  my_ptrdiff_t diff = rec - table->record[0];
  for (uint32_t i = 0; i < n; i++) {
    Field *f = field_by_name(table, cols[i]);
    if (!f) return -1;
    if (f->is_null(diff)) return 1;
    KEY_PART_INFO kp;
    memset(&kp, 0, sizeof kp);
    kp.field = f;
    kp.length = (uint16)parts[i].length;
    kp.null_bit = (parts[i].flags & TDB_PART_NULLABLE) ? 1 : 0;
    kp.key_part_flag = (parts[i].flags & TDB_PART_DESC) ? HA_REVERSE_SORT : 0;
    switch (f->real_type()) {
    case MYSQL_TYPE_VARCHAR:
    case MYSQL_TYPE_VAR_STRING:
    case MYSQL_TYPE_STRING: {
      /* The key codec truncates to the part's width: a longer value matches
         nothing there. */
      f->move_field_offset(diff);
      String tmp;
      String *v = f->val_str(&tmp, &tmp);
      CHARSET_INFO *cs = f->charset();
      size_t chars = v ? cs->numchars(v->ptr(), v->ptr() + v->length()) : 0;
      size_t bytes = v ? v->length() : 0;
      f->move_field_offset(-diff);
      if (cs == &my_charset_bin ? bytes > kp.length : chars > kp.length / cs->mbmaxlen) return 2;
      break;
    }
    default:
      break;
    }
    encode_key_part(&kp, rec, table, out);
  }
  return 0;
}

bool checks_enabled(THD *thd) {
  return !(thd->variables.option_bits & OPTION_NO_FOREIGN_KEY_CHECKS);
}

}  // namespace

/* ------------------------------------------------------------------ catalog */

void tidesdb::fk_split_path(const char *path, std::string *db, std::string *table) {
  split_path(path, db, table);
}

namespace {
/* Table form's keys as the constraint catalog records them (tdb_key_def), with
   the strings and parts they point at. */
struct Key_defs {
  std::deque<std::string> strings;
  std::vector<std::vector<tdb_key_part_def>> parts;
  std::vector<tdb_key_def> keys;
  explicit Key_defs(TABLE *form);
};

Key_defs::Key_defs(TABLE *form) {
  TABLE_SHARE *s = form->s;
  bool hidden_pk = s->primary_key >= MAX_KEY;
  parts.resize(s->keys);
  keys.resize(s->keys);
  uint next = 1;
  for (uint k = 0; k < s->keys; k++) {
    KEY *key = &form->key_info[k];
    bool pk = !hidden_pk && k == s->primary_key;
    tdb_key_def &d = keys[k];
    d.engine_index = pk ? 0 : next++;
    d.flags = (pk ? TDB_KEY_PRIMARY : 0) | ((key->flags & HA_NOSAME) ? TDB_KEY_UNIQUE : 0);
    if (is_fulltext(key) || is_spatial(key) || key->algorithm == HA_KEY_ALG_LONG_HASH)
      d.flags |= TDB_KEY_UNUSABLE;
    if (is_fulltext(key)) d.flags |= TDB_KEY_FULLTEXT;
    d.name = key->name.str;
    for (uint p = 0; p < key->user_defined_key_parts; p++) {
      KEY_PART_INFO *kp = &key->key_part[p];
      Field *f = kp->field;
      if (!f) {
        d.flags |= TDB_KEY_UNUSABLE;
        break;
      }
      strings.push_back(type_sig(f));
      tdb_key_part_def pd;
      pd.column = f->field_name.str;
      pd.type_sig = strings.back().c_str();
      pd.length = kp->length;
      pd.flags = (kp->null_bit ? TDB_PART_NULLABLE : 0) |
                 ((kp->key_part_flag & HA_REVERSE_SORT) ? TDB_PART_DESC : 0) |
                 ((kp->key_part_flag & HA_PART_KEY_SEG) || !part_is_covered(kp) ? TDB_PART_PREFIX
                                                                                : 0);
      parts[k].push_back(pd);
    }
    d.n_parts = (uint32_t)parts[k].size();
    d.parts = parts[k].data();
  }
}
}  // namespace

int tidesdb::fk_register_keys(const char *name, TABLE *form) {
  if (is_temporary_path(name)) return 0;
  Key_defs defs(form);
  return tdb_table_set_keys(name, defs.keys.data(), (uint32_t)defs.keys.size());
}

bool tidesdb::fk_keys_serve_children(const char *name, TABLE *form) {
  if (is_temporary_path(name)) return true;
  Key_defs defs(form);
  return tdb_fk_keys_serve(name, defs.keys.data(), (uint32_t)defs.keys.size()) == TDB_OK;
}

int tidesdb::fk_refuse_unsupported(THD *thd) {
  for (const Key &key : thd->lex->alter_info.key_list) {
    if (key.type != Key::FOREIGN_KEY) continue;
    const Foreign_key &fk = static_cast<const Foreign_key &>(key);
    for (enum_fk_option rule : {fk.delete_opt, fk.update_opt}) {
      if (rule == FK_OPTION_SET_DEFAULT) {
        my_error(ER_NOT_SUPPORTED_YET, MYF(0),
                 "ON DELETE / ON UPDATE SET DEFAULT on TidesDB tables");
        return HA_ERR_UNSUPPORTED;
      }
    }
    if (fk.match_opt == Foreign_key::FK_MATCH_PARTIAL) {
      my_error(ER_NOT_SUPPORTED_YET, MYF(0), "MATCH PARTIAL");
      return HA_ERR_UNSUPPORTED;
    }
  }
  return 0;
}

int tidesdb::fk_define(THD *thd, const char *name, bool in_place) {
  LEX *lex = thd->lex;
  bool declares = false;
  for (const Key &key : lex->alter_info.key_list) declares |= key.type == Key::FOREIGN_KEY;
  if (is_temporary_path(name)) {
    if (!declares) return 0;
    /* As InnoDB: errno 150 with its reason. */
    TABLE_LIST *tl = lex->first_select_lex() ? lex->first_select_lex()->table_list.first
                                             : nullptr;
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, HA_ERR_CANNOT_ADD_FOREIGN,
                        "Create  table `%s`.`%s` with foreign key constraint failed. Temporary "
                        "tables can't have foreign key constraints.",
                        tl ? tl->db.str : "", tl ? tl->table_name.str : "");
    return HA_ERR_CANNOT_ADD_FOREIGN;
  }
  std::string db, tbl;
  split_path(name, &db, &tbl);
  /* A copying ALTER TABLE creates the new definition under a #sql name: the
     constraints of the table it rebuilds carry over. */
  TABLE_LIST *first = lex->first_select_lex() ? lex->first_select_lex()->table_list.first : nullptr;
  char from_path[FN_REFLEN + 1];
  const char *inherit_from = nullptr;
  std::string display = tbl;
  const char *base = strrchr(name, '/');
  base = base ? base + 1 : name;
  bool rebuild = strncmp(base, "#sql", 4) == 0 && first &&
                 (thd_sql_command(thd) == SQLCOM_ALTER_TABLE ||
                  thd_sql_command(thd) == SQLCOM_CREATE_INDEX ||
                  thd_sql_command(thd) == SQLCOM_DROP_INDEX);
  if (rebuild) {
    build_table_filename(from_path, sizeof from_path - 1, first->db.str, first->table_name.str,
                         "", 0);
    inherit_from = from_path;
    display = first->table_name.str;
    db = first->db.str;
  } else if (in_place) {
    inherit_from = name;
  }
  std::deque<std::string> strings;
  std::vector<std::vector<const char *>> cols;
  std::vector<tdb_fk_def> add;
  for (const Key &key : lex->alter_info.key_list) {
    if (key.type != Key::FOREIGN_KEY) continue;
    const Foreign_key &fk = static_cast<const Foreign_key &>(key);
    tdb_fk_def d;
    d.name = fk.constraint_name.str && fk.constraint_name.length ? fk.constraint_name.str : nullptr;
    char parent_path[FN_REFLEN + 1];
    build_table_filename(parent_path, sizeof parent_path - 1,
                         fk.ref_db.str && fk.ref_db.length ? fk.ref_db.str : db.c_str(),
                         fk.ref_table.str, "", 0);
    strings.push_back(parent_path);
    d.parent = strings.back().c_str();
    std::vector<const char *> child_cols, parent_cols;
    for (const Key_part_spec &kp : fk.columns) child_cols.push_back(kp.field_name.str);
    for (const Key_part_spec &kp : fk.ref_columns) parent_cols.push_back(kp.field_name.str);
    if (child_cols.size() != parent_cols.size()) {
      my_error(ER_WRONG_FK_DEF, MYF(0), d.name ? d.name : "foreign key without name",
               "Key reference and table reference don't match");
      return HA_ERR_CANNOT_ADD_FOREIGN;
    }
    d.n_cols = (uint32_t)child_cols.size();
    cols.push_back(std::move(child_cols));
    cols.push_back(std::move(parent_cols));
    d.on_delete = fk.delete_opt;
    d.on_update = fk.update_opt;
    add.push_back(d);
  }
  /* The column arrays, now that cols no longer grows. */
  for (size_t i = 0; i < add.size(); i++) {
    add[i].child_cols = cols[2 * i].data();
    add[i].parent_cols = cols[2 * i + 1].data();
  }
  std::vector<const char *> drop;
  for (const Alter_drop &d : lex->alter_info.drop_list)
    if (d.type == Alter_drop::FOREIGN_KEY) drop.push_back(tidesdb_compat::c_str(d.name));
  /* Always asked, even with nothing to add: entries left under this name by an
     earlier table are replaced (the engine skips the write when there are none). */
  int st = tdb_fk_define(name, display.c_str(), inherit_from, drop.data(), (uint32_t)drop.size(),
                         add.data(), (uint32_t)add.size(), checks_enabled(thd));
  if (st == TDB_FK_MALFORMED && rebuild) {
    /* The copy drops an index a constraint needs: InnoDB's error. */
    for (const Alter_drop &d : lex->alter_info.drop_list) {
      if (d.type == Alter_drop::KEY) {
        my_error(ER_DROP_INDEX_FK, MYF(0), d.name);
        return HA_ERR_CANNOT_ADD_FOREIGN;
      }
    }
  }
  if (st == TDB_FK_MALFORMED && in_place && add.size() == 1 &&
      strstr(tdb_last_error(), "no index in the referenced table")) {
    /* InnoDB's in-place ADD FOREIGN KEY names the constraint and the parent. */
    std::string pdb, ptbl;
    split_path(add[0].parent, &pdb, &ptbl);
    my_error(ER_FK_NO_INDEX_PARENT, MYF(0), add[0].name ? add[0].name : "", ptbl.c_str());
    return HA_ERR_CANNOT_ADD_FOREIGN;
  }
  if (st == TDB_FK_MALFORMED) {
    push_warning_printf(thd, Sql_condition::WARN_LEVEL_WARN, HA_ERR_CANNOT_ADD_FOREIGN,
                        "Create  table `%s`.`%s` with foreign key %s", db.c_str(),
                        display.c_str(), tdb_last_error());
    return HA_ERR_CANNOT_ADD_FOREIGN;
  }
  if (st == TDB_DUPLICATE) {
    const char *msg = tdb_last_error();
    const char *q = strchr(msg, '`');
    std::string dup = q ? std::string(q + 1, strcspn(q + 1, "`")) : std::string(msg);
    /* As InnoDB: a CREATE or copying ALTER fails with errno 121; an in-place
       ALTER names the constraint with its database ("db/name"), as a duplicate
       when the table has it already. */
    if (!in_place) return HA_ERR_FOUND_DUPP_KEY;
    std::string id = db + "/" + dup;
    if (strstr(msg, "on this table"))
      my_error(ER_DUP_CONSTRAINT_NAME, MYF(0), "FOREIGN KEY", id.c_str());
    else
      my_error(ER_FK_FAIL_ADD_SYSTEM, MYF(0), id.c_str());
    return HA_ERR_CANNOT_ADD_FOREIGN;
  }
  if (st) sql_print_error("TidesDB: %s (table %s)", tdb_last_error(), name);
  return st ? to_ha_error(st, thd) : 0;
}

int tidesdb::fk_check_drop(THD *thd, const char *name) {
  if (is_temporary_path(name) || !checks_enabled(thd)) return 0;
  Fk_list l;
  if (tdb_fk_list_open(name, 1, &l.list)) return 0;
  std::string db, tbl;
  split_path(name, &db, &tbl);
  for (uint32_t i = 0; i < l.count(); i++) {
    const tdb_fk_info *fk = l.at(i);
    if (!strcmp(fk->child, fk->parent)) continue; /* a self-reference */
    std::string cdb, ctbl;
    split_path(fk->child, &cdb, &ctbl);
    if (thd_sql_command(thd) == SQLCOM_DROP_DB && cdb == db) continue;
    return HA_ERR_ROW_IS_REFERENCED;
  }
  return 0;
}

/* ------------------------------------------------------------- handler hooks */

static LEX_CSTRING *lex_str(THD *thd, const char *s) {
  return thd_make_lex_string(thd, nullptr, s, strlen(s), 1);
}

static int fill_list(THD *thd, const char *name, bool as_parent, List<FOREIGN_KEY_INFO> *out) {
  Fk_list l;
  int st = tdb_fk_list_open(name, as_parent, &l.list);
  if (st) return to_ha_error(st, thd);
  for (uint32_t i = 0; i < l.count(); i++) {
    const tdb_fk_info *fk = l.at(i);
    void *mem = thd_alloc(thd, sizeof(FOREIGN_KEY_INFO));
    if (!mem) return HA_ERR_OUT_OF_MEM;
    FOREIGN_KEY_INFO *info = new (mem) FOREIGN_KEY_INFO();
    std::string cdb, ctbl, pdb, ptbl;
    split_path(fk->child, &cdb, &ctbl);
    split_path(fk->parent, &pdb, &ptbl);
    info->foreign_id = lex_str(thd, fk->name);
    info->foreign_db = lex_str(thd, cdb.c_str());
    info->foreign_table = lex_str(thd, ctbl.c_str());
    info->referenced_db = lex_str(thd, pdb.c_str());
    info->referenced_table = lex_str(thd, ptbl.c_str());
    info->update_method = (enum_fk_option)fk->on_update;
    info->delete_method = (enum_fk_option)fk->on_delete;
    info->referenced_key_name = lex_str(thd, fk->parent_key_name);
    for (uint32_t c = 0; c < fk->n_cols; c++) {
      info->foreign_fields.push_back(lex_str(thd, fk->child_cols[c]), thd->mem_root);
      info->referenced_fields.push_back(lex_str(thd, fk->parent_cols[c]), thd->mem_root);
    }
    out->push_back(info, thd->mem_root);
  }
  return 0;
}

int ha_tidesdb::get_foreign_key_list(THD *thd, List<FOREIGN_KEY_INFO> *f_key_list) {
  return fill_list(thd, m_name.c_str(), false, f_key_list);
}

int ha_tidesdb::get_parent_foreign_key_list(THD *thd, List<FOREIGN_KEY_INFO> *f_key_list) {
  return fill_list(thd, m_name.c_str(), true, f_key_list);
}

bool ha_tidesdb::referenced_by_foreign_key() const noexcept {
  tdb_fk_list *l = nullptr;
  if (tdb_fk_list_open(m_name.c_str(), 1, &l)) return false;
  bool any = tdb_fk_list_count(l) > 0;
  tdb_fk_list_free(l);
  return any;
}

bool ha_tidesdb::can_switch_engines() {
  /* As InnoDB: ALTER TABLE ... ENGINE= would drop the constraints. */
  for (int as_parent = 0; as_parent < 2; as_parent++) {
    Fk_list l;
    if (tdb_fk_list_open(m_name.c_str(), as_parent, &l.list) == 0 && l.count() > 0) return false;
  }
  return true;
}

char *ha_tidesdb::get_foreign_key_create_info() {
  Fk_list l;
  if (tdb_fk_list_open(m_name.c_str(), 0, &l.list)) return nullptr;
  std::string s;
  for (uint32_t i = 0; i < l.count(); i++) s.append(",\n  ").append(constraint_text(l.at(i)));
  if (s.empty()) return nullptr;
  return my_strdup(PSI_NOT_INSTRUMENTED, s.c_str(), MYF(0));
}

void ha_tidesdb::free_foreign_key_create_info(char *str) { my_free(str); }

/* ------------------------------------------------------------------- checks */

void ha_tidesdb::fk_forget() {
  tdb_fk_list_free(m_fk_child);
  tdb_fk_list_free(m_fk_parent);
  m_fk_child = m_fk_parent = nullptr;
  m_fk_loaded = false;
}

int ha_tidesdb::fk_load() {
  if (m_fk_loaded) return 0;
  int st = tdb_fk_list_open(m_name.c_str(), 0, &m_fk_child);
  if (!st) st = tdb_fk_list_open(m_name.c_str(), 1, &m_fk_parent);
  if (st) {
    fk_forget();
    return fail(st);
  }
  m_fk_loaded = true;
  return 0;
}

int ha_tidesdb::fk_check_child(const uchar *old_rec, const uchar *new_rec) {
  THD *thd = ha_thd();
  if (!checks_enabled(thd)) return 0;
  if (int err = fk_load()) return err;
  std::string prefix, old_prefix;
  uint64_t stale_tries = 0;
  for (uint32_t i = 0; i < tdb_fk_list_count(m_fk_child); i++) {
    const tdb_fk_info *fk = tdb_fk_list_get(m_fk_child, i);
    /* The constraint whose ON UPDATE CASCADE writes this row: its parent gets the
       value once the parent's own change is applied. */
    if (!m_fk_skip.empty() && m_fk_skip == fk->name) continue;
    int r = 2; /* no parent index: nothing can match */
    if (fk->parent_index != UINT32_MAX) {
      r = encode_for(table, fk->child_cols, fk->parent_parts, fk->n_cols, new_rec, &prefix);
      if (r < 0) return fail(TDB_INTERNAL);
      if (r == 1) continue; /* a NULL column: nothing to check */
      if (old_rec && r == 0 &&
          encode_for(table, fk->child_cols, fk->parent_parts, fk->n_cols, old_rec,
                     &old_prefix) == 0 &&
          old_prefix == prefix)
        continue; /* the update keeps the columns */
    } else {
      /* Still skip NULLs and unchanged columns (the parent table is missing). */
      bool null = false, changed = !old_rec;
      my_ptrdiff_t dn = new_rec - table->record[0];
      for (uint32_t c = 0; c < fk->n_cols; c++) {
        Field *f = field_by_name(table, fk->child_cols[c]);
        if (!f) return fail(TDB_INTERNAL);
        null |= f->is_null(dn);
        if (old_rec) {
          my_ptrdiff_t d = old_rec - new_rec;
          f->move_field_offset(dn);
          changed |= f->is_null() != f->is_null(d) || f->cmp_binary(f->ptr, f->ptr + d) != 0;
          f->move_field_offset(-dn);
        }
      }
      if (null || !changed) continue;
    }
    if (r == 0) {
      int st = tdb_fk_probe(trx(), fk->parent, fk->parent_index, fk->parent_family,
                            (const uint8_t *)prefix.data(), prefix.size(), TDB_LOCK_SHARED,
                            fk->parent, fk->parent_index, (const uint8_t *)prefix.data(),
                            prefix.size());
      if (st == TDB_STALE) {
        /* An ALTER of the parent switched its families or keys since the list
           was made: resolve every constraint again, while the engine says so. */
        if (int give_up = tdb_fk_stale_retry(&stale_tries, statement_lock_wait_ms(thd),
                                             thd_killed(thd) != 0))
          return fail(give_up);
        fk_forget();
        if (int err = fk_load()) return err;
        i = UINT32_MAX; /* the loop's i++ starts again at 0 */
        continue;
      }
      if (st == TDB_OK) {
        if (wsrep_certifies(ha_thd(), table))
          if (int err = wsrep_append_parent_key(ha_thd(), fk->parent, fk->parent_key_name, prefix))
            return err;
        continue;
      }
      if (st != TDB_NOT_FOUND) return fail(st);
    }
    m_fk_error = violation_text(fk);
    return HA_ERR_NO_REFERENCED_ROW;
  }
  return 0;
}

/* InnoDB's FK_MAX_CASCADE_DEL: nested ON DELETE / ON UPDATE actions deeper than
   this fail the statement. */
static const int FK_MAX_CASCADE_DEPTH = 15;
static thread_local int fk_cascade_depth = 0;
/* The tables whose rows the statement or an enclosing action is updating (paths
   without "./"): as InnoDB, an action that would update one of them again (a
   cyclic cascaded update) fails the statement instead. */
static thread_local std::vector<std::string> fk_updating;

static std::string plain_path(const std::string &name) {
  return name.compare(0, 2, "./") == 0 ? name.substr(2) : name;
}

/* Keeps a table on fk_updating for a scope. */
struct Updating_scope {
  bool on;
  Updating_scope(bool on_, const std::string &name) : on(on_) {
    if (on) fk_updating.push_back(plain_path(name));
  }
  ~Updating_scope() {
    if (on) fk_updating.pop_back();
  }
};

/* The statement's open instance of child table `path` (the server's FK prelocking
   opened it: sql_base.cc prepare_fk_prelocking_list), another one than `self`. */
static TABLE *find_child_table(THD *thd, const char *path, TABLE *self, handlerton *ht) {
  std::string db, tbl;
  split_path(path, &db, &tbl);
  TABLE *found = nullptr;
  for (TABLE *t = thd->open_tables; t; t = t->next) {
    if (t == self || !t->file || t->file->ht != ht || !t->s) continue;
    if (strcmp(t->s->db.str, db.c_str()) || strcmp(t->s->table_name.str, tbl.c_str())) continue;
    if (t->reginfo.lock_type >= TL_WRITE_ALLOW_WRITE) return t;
    if (!found) found = t;
  }
  return found;
}

int ha_tidesdb::fk_check_parent(const uchar *old_rec, const uchar *new_rec) {
  THD *thd = ha_thd();
  if (!checks_enabled(thd)) return 0;
  if (int err = fk_load()) return err;
  std::string own, own_new, child_prefix;
  Updating_scope updating(new_rec != nullptr && tdb_fk_list_count(m_fk_parent) > 0, m_name);
  for (uint32_t i = 0; i < tdb_fk_list_count(m_fk_parent); i++) {
    const tdb_fk_info *fk = tdb_fk_list_get(m_fk_parent, i);
    if (fk->child_index == UINT32_MAX || fk->parent_index == UINT32_MAX) continue;
    /* The referenced value in this table's own index format: the lock name. */
    int r = encode_for(table, fk->parent_cols, fk->parent_parts, fk->n_cols, old_rec, &own);
    if (r < 0) return fail(TDB_INTERNAL);
    if (r == 1) continue; /* NULL is referenced by nothing */
    if (new_rec && encode_for(table, fk->parent_cols, fk->parent_parts, fk->n_cols, new_rec,
                              &own_new) == 0 &&
        own_new == own)
      continue; /* the referenced value stays */
    r = encode_for(table, fk->parent_cols, fk->child_parts, fk->n_cols, old_rec, &child_prefix);
    if (r < 0) return fail(TDB_INTERNAL);
    uint32_t rule = new_rec ? fk->on_update : fk->on_delete;
    bool action = rule == FK_OPTION_CASCADE || rule == FK_OPTION_SET_NULL;
    /* By position: this statement holds the parent's metadata lock, so no ALTER
       of it switches families or keys under the list. */
    int st = tdb_fk_probe(trx(), fk->parent, fk->parent_index, TDB_FK_FAMILY_BY_POSITION,
                          (const uint8_t *)own.data(), own.size(), TDB_LOCK_EXCLUSIVE,
                          fk->child, fk->child_index,
                          (const uint8_t *)child_prefix.data(), r == 0 ? child_prefix.size() : 0);
    if (r != 0 && st == TDB_OK) continue; /* locked; no child can hold the value */
    if (st == TDB_NOT_FOUND) continue;
    if (st != TDB_OK) return fail(st);
    if (action) {
      if (int err = fk_cascade(fk, rule, new_rec, child_prefix)) return err;
      continue;
    }
    m_fk_error = violation_text(fk);
    return HA_ERR_ROW_IS_REFERENCED;
  }
  return 0;
}

/* Copies the parent's new values of the constraint's columns into the child's
   record (ON UPDATE CASCADE), or sets them NULL (SET NULL). */
static void fk_set_child_columns(const tdb_fk_info *fk, uint32_t rule, TABLE *parent,
                                 const uchar *parent_rec, TABLE *child) {
  my_ptrdiff_t pd = parent_rec - parent->record[0];
  for (uint32_t c = 0; c < fk->n_cols; c++) {
    Field *cf = field_by_name(child, fk->child_cols[c]);
    if (!cf) continue;
    if (rule == FK_OPTION_SET_NULL) {
      cf->set_null();
      continue;
    }
    Field *pf = field_by_name(parent, fk->parent_cols[c]);
    if (!pf) continue;
    pf->move_field_offset(pd);
    if (pf->is_null()) {
      cf->set_null();
    } else {
      cf->set_notnull();
      cf->store_field(pf);
    }
    pf->move_field_offset(-pd);
  }
}

int ha_tidesdb::fk_cascade(const tdb_fk_info *fk, uint32_t rule, const uchar *new_rec,
                           const std::string &child_prefix) {
  THD *thd = ha_thd();
  TABLE *ct = find_child_table(thd, fk->child, table, ht);
  if (!ct) {
    m_last_error = std::string("the child table of constraint ") + fk->name +
                   " is not open for its ON DELETE / ON UPDATE action";
    return HA_ERR_TIDESDB_INTERNAL;
  }
  bool updates_child = rule == FK_OPTION_SET_NULL || new_rec != nullptr;
  if (updates_child) {
    for (const std::string &t : fk_updating) {
      if (t == fk->child) {
        m_fk_error = violation_text(fk);
        return HA_ERR_ROW_IS_REFERENCED;
      }
    }
  }
  if (fk_cascade_depth >= FK_MAX_CASCADE_DEPTH) {
    /* As InnoDB: "Got error 193 '<constraint>' from <engine>". */
    m_fk_error = violation_text(fk);
    return HA_ERR_FK_DEPTH_EXCEEDED;
  }
  ha_tidesdb *ch = static_cast<ha_tidesdb *>(ct->file);
  /* The child rows holding the value (latest committed state and our own
     writes), collected first: the changes below move the entries. */
  std::vector<std::string> pks;
  tdb_cursor *cur = nullptr;
  int st = tdb_cursor_open_latest(trx(), ch->m_tbl, fk->child_index, &cur);
  if (st) return fail(st);
  st = tdb_cursor_seek(cur, TDB_SEEK_GE, (const uint8_t *)child_prefix.data(),
                       child_prefix.size());
  while (st == TDB_OK) {
    const uint8_t *k, *v;
    size_t kl, vl;
    st = tdb_cursor_entry(cur, &k, &kl, &v, &vl);
    if (st) break;
    if (kl < child_prefix.size() || memcmp(k, child_prefix.data(), child_prefix.size())) break;
    const uint8_t *pk = k;
    size_t pk_len = kl;
    if (fk->child_index != 0) {
      if (!ch->pk_of_entry(k, kl, v, vl, &pk)) {
        st = TDB_CORRUPTION;
        break;
      }
      pk_len = ch->m_pk_len;
    }
    pks.emplace_back((const char *)pk, pk_len);
    st = tdb_cursor_next(cur);
  }
  tdb_cursor_close(cur);
  if (st != TDB_OK && st != TDB_END) return fail(st);

  /* The instance may be in use: a self-reference nested deeper than the one extra
     instance the prelocking opened comes back to a handler whose row change is
     under way (its record buffers, the BLOB bytes behind them, its last key).
     Keep them and put them back afterwards. */
  std::string saved_rec0((const char *)ct->record[0], ct->s->reclength);
  std::string saved_rec1((const char *)ct->record[1], ct->s->reclength);
  std::string saved_value[2], saved_last_pk = ch->m_last_pk;
  std::swap(saved_value[0], ch->m_value[0]);
  std::swap(saved_value[1], ch->m_value[1]);
  External_state saved_external[2];
  std::swap(saved_external[0], ch->m_external[0]);
  std::swap(saved_external[1], ch->m_external[1]);
  MY_BITMAP *save_read = ct->read_set, *save_write = ct->write_set;
  ct->column_bitmaps_set(&ct->s->all_set, &ct->s->all_set);
  auto save_lock = ch->m_lock_rows;
  ch->m_lock_rows = ROW_LOCK_EXCLUSIVE;
  std::string save_skip = ch->m_fk_skip;
  ch->m_fk_skip = fk->name;
  fk_cascade_depth++;
  int err = 0;
  /* Each child row is changed by the child's handler rather than by writing its
     entries here: that also keeps its indexes, checks its own constraints and
     appends its certification keys under wsrep, as a row written directly
     (tidesdb_galera.fk_cascade_keys). */
  for (const std::string &pk : pks) {
    err = ch->locked_read(ct->record[0], (const uint8_t *)pk.data(), pk.size());
    if (err == HA_ERR_KEY_NOT_FOUND) { /* gone already (an earlier action) */
      err = 0;
      continue;
    }
    if (err) break;
    if (ct->vfield && (err = ct->update_virtual_fields(ch, VCOL_UPDATE_FOR_READ))) break;
    if (!new_rec && rule == FK_OPTION_CASCADE) {
      err = ch->delete_row(ct->record[0]);
    } else {
      store_record(ct, record[1]);
      fk_set_child_columns(fk, rule, table, new_rec, ct);
      if (ct->vfield && (err = ct->update_virtual_fields(ch, VCOL_UPDATE_FOR_WRITE))) break;
      err = ch->update_row(ct->record[1], ct->record[0]);
      if (err == HA_ERR_RECORD_IS_THE_SAME) err = 0;
    }
    if (err) break;
  }
  fk_cascade_depth--;
  ch->m_fk_skip = save_skip;
  ch->m_lock_rows = save_lock;
  ct->column_bitmaps_set(save_read, save_write);
  memcpy(ct->record[0], saved_rec0.data(), saved_rec0.size());
  memcpy(ct->record[1], saved_rec1.data(), saved_rec1.size());
  /* swapped back into the same objects: the bytes are where the saved records'
     BLOB pointers point */
  std::swap(saved_value[0], ch->m_value[0]);
  std::swap(saved_value[1], ch->m_value[1]);
  std::swap(saved_external[0], ch->m_external[0]);
  std::swap(saved_external[1], ch->m_external[1]);
  ch->m_last_pk = saved_last_pk;
  if (err) {
    /* The server reports the error through this handler. */
    m_fk_error = ch->m_fk_error;
    m_last_error = ch->m_last_error;
  }
  return err;
}
