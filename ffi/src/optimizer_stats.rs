//! When a table's optimizer statistics (rec_per_key) are measured again on
//! their own, as `innodb_stats_auto_recalc` does it. The shim counts the rows
//! changed since the last measurement and asks here before each statement
//! that locks the table; the measurement itself (a sample of every index) is
//! the shim's.
//!
//! InnoDB queues a table for recalculation once more than a tenth of its rows
//! (plus 16) changed (`dict_stats_update_if_needed`), and its background
//! thread recalculates a table at most every 10 seconds
//! (`MIN_RECALC_INTERVAL`, dict0stats_bg.cc). Without that interval a table
//! under a steady write load would be sampled again every tenth of its size
//! in changes, in the thread of the statement that notices (docs/PROFILING.md
//! item 29). A table that has more than doubled (or been rewritten twice over) since it
//! was measured is measured at once: its statistics no longer describe it.

use std::ffi::c_int;

/// Milliseconds between two automatic measurements of one table (InnoDB's
/// `MIN_RECALC_INTERVAL`).
pub const MIN_RECALC_INTERVAL_MS: u64 = 10_000;

/// True when a table measured with `measured_rows` rows, `changed` row
/// changes and `ms_since` milliseconds ago is due to be measured again.
pub fn recalc_due(measured_rows: u64, changed: u64, ms_since: u64) -> bool {
    let threshold = 16 + measured_rows / 10;
    if changed <= threshold {
        return false;
    }
    ms_since >= MIN_RECALC_INTERVAL_MS
        || changed > measured_rows.saturating_mul(2).saturating_add(16)
}

/// `recalc_due` for the shim (nonzero: measure now).
#[no_mangle]
pub extern "C" fn tdb_stats_recalc_due(measured_rows: u64, changed: u64, ms_since: u64) -> c_int {
    c_int::from(recalc_due(measured_rows, changed, ms_since))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenth_changed_waits_for_the_interval() {
        assert!(!recalc_due(100_000, 10_016, 60_000));
        assert!(!recalc_due(100_000, 10_017, 9_999));
        assert!(recalc_due(100_000, 10_017, 10_000));
    }

    #[test]
    fn a_table_that_outgrew_its_statistics_is_measured_at_once() {
        // One row when measured, twenty added: plans need the new figures.
        assert!(recalc_due(1, 20, 0));
        assert!(!recalc_due(1, 18, 0));
        assert!(recalc_due(1_000, 2_017, 0));
        assert!(!recalc_due(1_000, 2_016, 0));
    }

    #[test]
    fn no_overflow_at_the_limits() {
        assert!(!recalc_due(u64::MAX, u64::MAX, 0));
        assert!(recalc_due(u64::MAX, u64::MAX, u64::MAX));
        assert!(recalc_due(0, u64::MAX, 0));
    }
}
