/* cost_model: see cost_model.h. */
#include "cost_model.h"

namespace tidesdb {
namespace cost {

double table_pages(uint64_t data_bytes) {
  uint64_t pages = (data_bytes + PAGE_BYTES - 1) / PAGE_BYTES;
  return pages ? (double)pages : 1.0;
}

double scan_time(double pages) { return pages; }

double primary_read_time(double ranges, double rows, double upper_bound_rows, double pages) {
  double scan = scan_time(pages);
  if (upper_bound_rows < rows || upper_bound_rows <= 0) return scan;
  return ranges + rows / upper_bound_rows * scan;
}

double secondary_read_time(double ranges, double rows) { return ranges + rows; }

}  // namespace cost
}  // namespace tidesdb
