//! Pacing of online builds (`tidesdb_online_alter_max_rows_per_second`): an online
//! ALTER that rebuilds a table or adds an index may be slowed so that its reads and
//! writes leave room for the workload it runs beside. The shim asks, between rows
//! (or batches), how long to wait; the wait itself is the shim's, so that it can
//! stop at once when the statement is killed.

/// Microseconds an online build that has written `rows_done` rows in `elapsed_us`
/// microseconds waits before it goes on, so as to stay at or under
/// `rows_per_second` on average; 0 when it is behind that rate or the rate is 0
/// (unlimited).
#[no_mangle]
pub extern "C" fn tdb_build_pace_us(rows_done: u64, elapsed_us: u64, rows_per_second: u64) -> u64 {
    if rows_per_second == 0 {
        return 0;
    }
    let due_us = u128::from(rows_done) * 1_000_000 / u128::from(rows_per_second);
    u64::try_from(due_us)
        .unwrap_or(u64::MAX)
        .saturating_sub(elapsed_us)
}

#[cfg(test)]
mod tests {
    use super::tdb_build_pace_us;

    #[test]
    fn unlimited_never_waits() {
        assert_eq!(tdb_build_pace_us(1_000_000, 0, 0), 0);
    }

    #[test]
    fn ahead_of_the_rate_waits_for_the_difference() {
        // 5000 rows at 1000 rows/s are due at 5 s; 2 s have passed.
        assert_eq!(tdb_build_pace_us(5000, 2_000_000, 1000), 3_000_000);
    }

    #[test]
    fn behind_the_rate_goes_on() {
        assert_eq!(tdb_build_pace_us(5000, 9_000_000, 1000), 0);
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        assert_eq!(tdb_build_pace_us(u64::MAX, 0, 1), u64::MAX);
    }
}
