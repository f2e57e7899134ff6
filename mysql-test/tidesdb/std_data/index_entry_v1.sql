-- The tables of index_entry_v1.tar.gz (scripts/make-upgrade-fixture.sh), written
-- by the last plugin whose secondary index entries were all value version 1
-- (commit 16c5814): every covered column packed in the entry's value. Test
-- tidesdb.upgrade_index_entry_v1 reads them with the current plugin.
CREATE DATABASE IF NOT EXISTS test;
USE test;
CREATE TABLE v1_types (
  id INT PRIMARY KEY,
  i INT, u BIGINT UNSIGNED, s SMALLINT, y YEAR,
  f FLOAT, d DOUBLE, n DECIMAL(12,3),
  dt DATE, ts DATETIME(3), tm TIME(2),
  v VARCHAR(20),
  KEY k_int (i, u),
  KEY k_desc (n DESC, s),
  KEY k_real (d, f),
  KEY k_time (dt, ts DESC, tm),
  UNIQUE KEY u_v (v),
  KEY k_year (y)
) ENGINE=TidesDB;
INSERT INTO v1_types
WITH RECURSIVE seq (x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < 300)
SELECT x,
       IF(x % 17 = 0, NULL, (x * 7919) % 2001 - 1000),
       IF(x % 19 = 0, NULL, x * 1000003 + 18446744073000000000 * (x % 2)),
       (x * 31) % 65535 - 32767,
       IF(x % 23 = 0, NULL, 1901 + x % 255),
       IF(x % 13 = 0, NULL, (x - 150) / 7),
       IF(x % 11 = 0, NULL, (x - 150) * 1.5e-3),
       IF(x % 29 = 0, NULL, (x - 150) * 12.345),
       IF(x % 31 = 0, NULL, '2000-01-01' + INTERVAL x * 37 DAY),
       '2020-06-01 12:00:00.000' + INTERVAL x * 3671 SECOND,
       IF(x % 37 = 0, NULL, SEC_TO_TIME(x * 997 - 150000)),
       IF(x % 41 = 0, NULL, CONCAT('v', x))
FROM seq;
-- No primary key: entries carry the hidden row id.
CREATE TABLE v1_hidden (a INT, b DATE, c VARCHAR(10), KEY k_ab (a, b)) ENGINE=TidesDB;
INSERT INTO v1_hidden
WITH RECURSIVE seq (x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < 100)
SELECT x % 10, '2024-02-29' - INTERVAL x DAY, CONCAT('c', x) FROM seq;
-- A composite primary key with a DESC part, its columns in the entries.
CREATE TABLE v1_pk (p1 BIGINT, p2 DATE, w INT, PRIMARY KEY (p1 DESC, p2), KEY k_w (w)) ENGINE=TidesDB;
INSERT INTO v1_pk
WITH RECURSIVE seq (x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM seq WHERE x < 100)
SELECT x * 1234567 - 50000000, '2010-01-01' + INTERVAL x DAY, x % 7 FROM seq;
-- v1_types and v1_pk in table files, v1_hidden left in the log (replayed at start).
OPTIMIZE TABLE v1_types, v1_pk;
