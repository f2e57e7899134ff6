/*
  spatial: SPATIAL keys of TidesDB tables (translation only; the Hilbert curve,
  window searches and extents are in ffi/src/spatial.rs).

  ## Format (an entry of a SPATIAL key's column family; ffi/src/spatial.rs)
    key   = 8-byte big-endian Hilbert value of the MBR's centre (tdb_spatial_key)
            + primary key encoding (or hidden row id)
    value = u8 0x10 (the secondary-entry header: version 1, not unique)
            + the MBR: 4 little-endian doubles xmin, xmax, ymin, ymax (the
              server's itMBR key image of the geometry)
  So a search filters entries by their MBR without reading rows, and the entry
  carries no covered columns (a SPATIAL key is never read index-only).
*/
#ifndef TIDESDB_SPATIAL_H
#define TIDESDB_SPATIAL_H

#include "tidesdb_server.h"
#include <string>

namespace tidesdb {

/* Bytes of an MBR image (the key image of a SPATIAL key part). */
static const uint SPATIAL_MBR_LEN = 4 * sizeof(double);

inline bool is_spatial(const KEY *key) { return tidesdb_compat::key_is_spatial(key); }

/* The MBR of the geometry of the SPATIAL key's column in rec. */
void spatial_mbr_of_record(const KEY *key, const uchar *rec, double mbr[4]);

/* The MBR a server key image (the 32 bytes of a SPATIAL key) holds. */
void spatial_mbr_of_image(const uchar *image, double mbr[4]);

/* The entry of rec (primary key encoding pk) in SPATIAL key `key` (see Format). */
void encode_spatial_entry(const KEY *key, const uchar *rec, const std::string &pk,
                          std::string *entry_key, std::string *entry_value);

/* The MBR an encoded entry value ends with. */
void spatial_mbr_of_value(const std::string &value, double mbr[4]);

/* enum tdb_mbr_mode of a search flag, or UINT32_MAX if it is not a spatial one. */
uint32_t spatial_mode(enum ha_rkey_function flag);

}  // namespace tidesdb

#endif
