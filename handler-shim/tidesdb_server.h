/*
  The server headers every translation unit of the shim needs, in the order the
  server's own plugins include them. MYSQL_SERVER and friends come from build.rs.
*/
#ifndef TIDESDB_SERVER_H
#define TIDESDB_SERVER_H

#include <my_global.h>
#include "sql_class.h"
#include "handler.h"
#include "field.h"
#include "key.h"
#include "table.h"
#include "thr_lock.h"
#include "sql_plugin.h"
#include "sql_lex.h"
#include <mysql/plugin.h>
#include "server_compat.h"

#endif
