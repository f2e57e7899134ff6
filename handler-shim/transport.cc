/* transport: see transport.h. */
#include "transport.h"

namespace tidesdb {

static std::string field_line(uint i, Field *f) {
  char type_buf[MAX_FIELD_WIDTH];
  String type(type_buf, sizeof type_buf, system_charset_info);
  f->sql_type(type);
  std::string s = "column " + std::to_string(i) + " `" + f->field_name.str + "` ";
  s.append(type.ptr(), type.length());
  s += (f->flags & NOT_NULL_FLAG) ? " NOT NULL" : " NULL";
  s += " real_type=" + std::to_string((int)f->real_type());
  s += " pack=" + std::to_string(f->pack_length());
  s += " len=" + std::to_string(f->field_length);
  s += " dec=" + std::to_string(f->decimals());
  s += " cs=" + std::to_string(f->charset() ? f->charset()->number : 0);
  s += " unsigned=" + std::to_string((f->flags & UNSIGNED_FLAG) ? 1 : 0);
  s += f->stored_in_db() ? " stored" : " virtual";
  return s;
}

static std::string key_line(TABLE *table, uint k) {
  const KEY &key = table->key_info[k];
  std::string s = "index " + std::to_string(k) + " `" + key.name.str + "`";
  if (k == table->s->primary_key) s += " primary";
  if (key.flags & HA_NOSAME) s += " unique";
  if (tidesdb_compat::key_is_fulltext(&key)) s += " fulltext";
  if (tidesdb_compat::key_is_spatial(&key)) s += " spatial";
  s += " alg=" + std::to_string((int)key.algorithm);
  s += " parts=";
  for (uint p = 0; p < key.user_defined_key_parts; p++) {
    const KEY_PART_INFO &part = key.key_part[p];
    if (p) s += ",";
    s += std::to_string(part.fieldnr) + ":" + std::to_string(part.length);
    if (part.key_part_flag & HA_REVERSE_SORT) s += ":desc";
  }
  return s;
}

std::vector<std::string> definition_lines(TABLE *table) {
  std::vector<std::string> lines;
  uint i = 0;
  for (Field **fp = table->field; *fp; fp++) lines.push_back(field_line(i++, *fp));
  for (uint k = 0; k < table->s->keys; k++) lines.push_back(key_line(table, k));
  lines.push_back(table->s->primary_key >= MAX_KEY ? "primary hidden" : "primary key");
  return lines;
}

bool is_export_lock(THD *thd, int lock_type) {
  return lock_type == F_RDLCK && thd_sql_command(thd) == SQLCOM_FLUSH && thd->lex &&
         (thd->lex->type & REFRESH_FOR_EXPORT);
}

}  // namespace tidesdb

/* ---- ha_tidesdb: DISCARD / IMPORT TABLESPACE ---- */
#include "ha_tidesdb.h"
#include "errors.h"

int ha_tidesdb::discard_or_import_tablespace(my_bool discard) {
  /* InnoDB's names in its messages: db/table */
  std::string norm = m_name.compare(0, 2, "./") == 0 ? m_name.substr(2) : m_name;
  int st;
  if (discard) {
    st = tdb_table_discard(m_name.c_str());
  } else {
    std::vector<std::string> lines = tidesdb::definition_lines(table);
    std::vector<const char *> ptrs;
    for (const std::string &l : lines) ptrs.push_back(l.c_str());
    st = tdb_table_import(m_tbl, m_name.c_str(), ptrs.data(), ptrs.size());
  }
  switch (st) {
  case TDB_OK:
    /* The table's rows changed under the share's statistics. */
    info(HA_STATUS_VARIABLE | HA_STATUS_CONST);
    return 0;
  case TDB_NOT_DISCARDED:
    sql_print_error("TidesDB: %s", tdb_last_error());
    my_error(ER_TABLESPACE_EXISTS, MYF(0), norm.c_str());
    return HA_ERR_TABLE_EXIST;
  case TDB_SCHEMA_MISMATCH:
    my_error(ER_TABLE_SCHEMA_MISMATCH, MYF(0), tdb_last_error());
    return HA_ERR_TABLE_DEF_CHANGED;
  default:
    return fail(st);
  }
}
