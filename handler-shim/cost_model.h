/*
  cost_model: the optimizer costs of a TidesDB table, shaped like InnoDB's (10.11
  ha_innobase::scan_time / read_time, handler::keyread_time with InnoDB's page
  size), so that tables of a few rows get InnoDB's plans: a table scan costs the
  pages of the rows (at least one), not a share of the row count, so a 3-row table
  is scanned (as by InnoDB) where a range over a unique index would change the
  outcome of `UPDATE t SET c0 = c0 + 2` (a duplicate midway).

  Only numbers in, numbers out: the 10.11 handler calls these from scan_time /
  read_time / keyread_time, and the 11.x cost-model mapping can call the same
  functions (pages and rows are what both APIs need).
*/
#ifndef TIDESDB_COST_MODEL_H
#define TIDESDB_COST_MODEL_H

#include <cstdint>

namespace tidesdb {
namespace cost {

/* InnoDB's page size: the unit of its scan cost and the handler's block_size. */
static const uint64_t PAGE_BYTES = 16384;

/* Pages the rows fill (bytes of the rows family and external values): at least
   one, as an InnoDB clustered index has its root page. */
double table_pages(uint64_t data_bytes);

/* A full scan: one unit per page (InnoDB does not discount sequential reads). */
double scan_time(double pages);

/* Reading `rows` rows in `ranges` ranges of the primary key (clustered): a seek
   per range plus the rows' share of the scan; at most the scan when rows exceed
   upper_bound_rows (the table's row count upper bound). */
double primary_read_time(double ranges, double rows, double upper_bound_rows, double pages);

/* Reading `rows` rows through a secondary index: a seek per range and a primary
   key lookup per row (handler::read_time). */
double secondary_read_time(double ranges, double rows);

}  // namespace cost
}  // namespace tidesdb

#endif
