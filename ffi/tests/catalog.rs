//! The table catalog over a real engine directory: DDL is durable and atomic, and
//! leftovers of an interrupted CREATE are cleaned up.
use tidesdb_core::{CfOptions, Db, DbOptions, Isolation};
use tidesdb_ffi::catalog::Catalog;
use tidesdb_ffi::status::{FfiResult, Status};

/// The status of an expected failure.
fn status_of<T>(result: FfiResult<T>) -> Status {
    match result {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.status,
    }
}

fn put_row(db: &Db, catalog: &Catalog, table: &str, key: &[u8]) {
    let shared = catalog.open_table(db, table).expect("open table");
    let cf = shared.cf(0).expect("rows cf");
    let mut txn = db.begin(Isolation::RepeatableRead);
    txn.put(&cf, key, b"row").expect("put");
    txn.commit().expect("commit");
}

fn row_count(db: &Db, catalog: &Catalog, table: &str) -> usize {
    let shared = catalog.open_table(db, table).expect("open table");
    let cf = shared.cf(0).expect("rows cf");
    let mut txn = db.begin(Isolation::RepeatableRead);
    let mut it = txn.iter(&cf, Default::default()).expect("iter");
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    n
}

#[test]
fn ddl_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, "./d/t1", 2, 1).expect("create t1");
        catalog.create(&db, "./d/t2", 0, 1).expect("create t2");
        catalog.create(&db, "./e/t3", 0, 1).expect("create t3");
        put_row(&db, &catalog, "./d/t1", b"k1");
        catalog
            .rename(&db, "./d/t1", "./d/renamed")
            .expect("rename");
        assert_eq!(
            status_of(catalog.open_table(&db, "./d/t1")),
            Status::NoSuchTable
        );
        assert_eq!(
            status_of(catalog.rename(&db, "./d/t2", "./d/renamed")),
            Status::TableExists
        );
        catalog.drop_database(&db, "./e/").expect("drop database");
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    let mut tables = catalog.list_tables(&db).expect("list");
    tables.sort();
    assert_eq!(tables, vec!["d/renamed".to_string(), "d/t2".to_string()]);
    assert_eq!(row_count(&db, &catalog, "./d/renamed"), 1);
    let shared = catalog.open_table(&db, "./d/renamed").expect("open");
    assert_eq!(shared.index_count(), 2);
}

#[test]
fn truncate_swaps_in_empty_families_and_resets_counters() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), DbOptions::default()).expect("open");
    let catalog = Catalog::open(&db, false).expect("catalog");
    catalog.create(&db, "./d/t", 1, 100).expect("create");
    let shared = catalog.open_table(&db, "./d/t").expect("open");
    assert_eq!(
        shared.autoinc_seed(5).expect("seed"),
        100,
        "AUTO_INCREMENT=100 is the floor"
    );
    assert_eq!(
        shared.autoinc_reserve(2, 1, 1, u64::MAX).expect("reserve"),
        100
    );
    assert_eq!(shared.autoinc_peek(), 102);
    // The counter stops one past the column's largest value.
    assert_eq!(shared.autoinc_reserve(10, 1, 1, 105).expect("reserve"), 102);
    assert_eq!(shared.autoinc_peek(), 106);
    shared.autoinc_observe(200, 105).expect("observe");
    assert_eq!(shared.autoinc_peek(), 106);
    put_row(&db, &catalog, "./d/t", b"k");
    catalog.truncate(&db, "./d/t").expect("truncate");
    assert_eq!(row_count(&db, &catalog, "./d/t"), 0);
    assert_eq!(shared.autoinc_peek(), 0, "reseeded after TRUNCATE");
    assert_eq!(shared.autoinc_seed(1).expect("seed"), 1);
    // The handle held before TRUNCATE sees the new families.
    let cf = shared.cf(0).expect("rows cf");
    let mut txn = db.begin(Isolation::RepeatableRead);
    assert_eq!(txn.get(&cf, b"k").expect("get"), None);
}

#[test]
fn drop_makes_open_handles_fail_cleanly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), DbOptions::default()).expect("open");
    let catalog = Catalog::open(&db, false).expect("catalog");
    catalog.create(&db, "./d/t", 0, 1).expect("create");
    let shared = catalog.open_table(&db, "./d/t").expect("open");
    catalog.drop_table(&db, "./d/t").expect("drop");
    assert_eq!(status_of(shared.cf(0)), Status::NoSuchTable);
    assert_eq!(
        status_of(catalog.drop_table(&db, "./d/t")),
        Status::NoSuchTable
    );
    // Only the catalog's own families (the catalog and its mirror) are left.
    let mut cfs = db.list_cfs();
    cfs.sort();
    assert_eq!(cfs, vec!["__catalog", "__catalog_mirror"]);
}

#[test]
fn orphan_families_are_dropped_at_open() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, "./d/t", 0, 1).expect("create");
        // As if a CREATE was interrupted after making its families.
        db.create_cf("t99", CfOptions::default()).expect("orphan");
        db.create_cf("t99.i1", CfOptions::default())
            .expect("orphan");
        db.create_cf("t99.b", CfOptions::default()).expect("orphan");
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let _catalog = Catalog::open(&db, false).expect("catalog");
    let mut cfs = db.list_cfs();
    cfs.sort();
    assert_eq!(
        cfs,
        vec![
            "__catalog".to_string(),
            "__catalog_mirror".to_string(),
            "t1".to_string(),
            "t1.b".to_string()
        ]
    );
}

#[test]
fn auto_increment_counter_survives_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, "./d/t", 0, 1).expect("create");
        let shared = catalog.open_table(&db, "./d/t").expect("open");
        shared.autoinc_seed(1).expect("seed");
        assert_eq!(
            shared.autoinc_reserve(3, 1, 1, u64::MAX).expect("reserve"),
            1
        );
        shared.autoinc_observe(41, u64::MAX).expect("observe");
        // No close: the counter must be in the WAL already.
        drop(shared);
        drop(catalog);
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    let shared = catalog.open_table(&db, "./d/t").expect("open");
    // Rows stored only up to id 3 would say 4; the persisted counter says 42.
    assert_eq!(shared.autoinc_seed(4).expect("seed"), 42);
}

/// As InnoDB: the persisted counter is one past the largest value a row used,
/// not the end of what a statement reserved (100 rows of INSERT ... SELECT
/// reserve 127 values; after a restart 101 comes next).
#[test]
fn reserved_but_unused_auto_increment_values_are_not_kept_over_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, "./d/t", 0, 1).expect("create");
        let shared = catalog.open_table(&db, "./d/t").expect("open");
        shared.autoinc_seed(1).expect("seed");
        assert_eq!(
            shared
                .autoinc_reserve(127, 1, 1, u64::MAX)
                .expect("reserve"),
            1
        );
        assert_eq!(shared.autoinc_peek(), 128);
        for v in 1..=100 {
            shared.autoinc_observe(v, u64::MAX).expect("observe");
        }
        assert_eq!(
            shared.autoinc_peek(),
            128,
            "the reservation holds while open"
        );
        drop(shared);
        drop(catalog);
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    let shared = catalog.open_table(&db, "./d/t").expect("open");
    // The rows left end at 35 (the others were deleted): the counter says 101.
    assert_eq!(shared.autoinc_seed(36).expect("seed"), 101);
}

/// A table's options reach every one of its column families, survive a reopen and
/// a TRUNCATE; out-of-range options are refused before anything is created.
#[test]
fn table_options_apply_to_every_family() {
    use tidesdb_core::Compression;
    use tidesdb_ffi::table::{TableOptions, COMPRESSION_ZSTD};
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = TableOptions {
        compression: COMPRESSION_ZSTD,
        compression_level: 7,
        bloom_bits_per_key: 3,
        block_size: 16384,
        value_separation_threshold: 2048,
        encrypted: 0,
        encryption_key_id: 1,
    };
    let check = |db: &Db, catalog: &Catalog| {
        let shared = catalog.open_table(db, "./d/t").expect("open");
        assert_eq!(shared.cfs().len(), 3);
        for cf in shared.cfs() {
            let o = cf.options();
            assert_eq!(o.compression, Compression::Zstd { level: 7 });
            assert_eq!(o.bloom_bits_per_key, 3);
            assert_eq!(o.block_size, 16384);
            assert_eq!(o.value_separation_threshold, Some(2048));
        }
    };
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        let cf_opts = opts.to_cf_options().expect("valid options");
        catalog
            .create_with(&db, "./d/t", 2, 1, &cf_opts)
            .expect("create");
        check(&db, &catalog);
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    check(&db, &catalog);
    catalog.truncate(&db, "./d/t").expect("truncate");
    check(&db, &catalog);

    for bad in [
        TableOptions {
            compression: 9,
            ..opts
        },
        TableOptions {
            compression_level: 40,
            ..opts
        },
        TableOptions {
            block_size: 0,
            ..opts
        },
        TableOptions {
            bloom_bits_per_key: 1000,
            ..opts
        },
    ] {
        assert_eq!(status_of(bad.to_cf_options()), Status::Invalid);
    }
    let none = TableOptions {
        value_separation_threshold: 0,
        ..opts
    };
    assert_eq!(
        none.to_cf_options()
            .expect("valid")
            .value_separation_threshold,
        None
    );
}

fn sorted_cfs(db: &Db) -> Vec<String> {
    let mut cfs = db.list_cfs();
    cfs.sort();
    cfs
}

#[test]
fn in_place_index_changes_keep_the_other_indexes_families() {
    use tidesdb_ffi::catalog::IndexSource::{Built, Existing};
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, "./d/t", 3, 1).expect("create");
        let shared = catalog.open_table(&db, "./d/t").expect("open");
        let third = shared.cf(3).expect("third index");
        let mut txn = db.begin(Isolation::RepeatableRead);
        txn.put(&third, b"k3", b"v3").expect("put");
        txn.commit().expect("commit");
        // DROP INDEX of the middle one: the third keeps its family (t1.i3).
        catalog
            .alter_indexes(&db, "./d/t", &[Existing(1), Existing(3)], &[])
            .expect("drop middle");
        assert_eq!(shared.index_count(), 2);
        assert_eq!(shared.cf(2).expect("moved").name(), "t1.i3");
        assert!(
            db.cf("t1.i2").is_none(),
            "the dropped index's family is gone"
        );
        // ADD INDEX: a new number (4), never the dropped one's.
        let built = catalog.create_index_cfs(&db, "./d/t", 1).expect("build");
        assert_eq!(built[0].0, 4);
        catalog
            .alter_indexes(&db, "./d/t", &[Built(0), Existing(1), Existing(2)], &built)
            .expect("add");
        assert_eq!(shared.cf(1).expect("new").name(), "t1.i4");
        // A build that never commits (crash): its family is an orphan.
        let abandoned = catalog.create_index_cfs(&db, "./d/t", 1).expect("build");
        assert_eq!(abandoned[0].0, 5);
        // A bad layout changes nothing.
        assert_eq!(
            status_of(catalog.alter_indexes(&db, "./d/t", &[Existing(1), Existing(1)], &[])),
            Status::Invalid
        );
        assert_eq!(
            status_of(catalog.alter_indexes(&db, "./d/t", &[Existing(4)], &[])),
            Status::Invalid
        );
        drop(shared);
        drop(catalog);
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    assert_eq!(
        sorted_cfs(&db),
        vec![
            "__catalog",
            "__catalog_mirror",
            "t1",
            "t1.b",
            "t1.i1",
            "t1.i3",
            "t1.i4"
        ]
    );
    let shared = catalog.open_table(&db, "./d/t").expect("open");
    assert_eq!(shared.index_count(), 3);
    let third = shared.cf(3).expect("third");
    assert_eq!(third.name(), "t1.i3");
    let mut txn = db.begin(Isolation::RepeatableRead);
    assert_eq!(txn.get(&third, b"k3").expect("get"), Some(b"v3".to_vec()));
    // 5 was never committed and its family is gone: the next build may use it.
    let built = catalog.create_index_cfs(&db, "./d/t", 1).expect("build");
    assert_eq!(built[0].0, 5);
}

#[test]
fn temporary_tables_do_not_outlive_a_crash() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, "./d/t", 1, 1).expect("create");
        catalog
            .create(&db, "/tmp/#sql-temptable-1f-4-0", 1, 1)
            .expect("create temporary");
        catalog
            .create(&db, "./d/#sql-alter-1f-4", 0, 1)
            .expect("create alter scratch");
        // No drop: as if the server was killed with the temporary table open.
        drop(catalog);
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    let mut tables = catalog.list_tables(&db).expect("list");
    tables.sort();
    // The ALTER's scratch table is the server's DDL recovery's business.
    assert_eq!(tables, vec!["d/#sql-alter-1f-4", "d/t"]);
    assert_eq!(
        sorted_cfs(&db),
        vec![
            "__catalog",
            "__catalog_mirror",
            "t1",
            "t1.b",
            "t1.i1",
            "t3",
            "t3.b"
        ]
    );
}

#[test]
fn spatial_extents_grow_persist_and_reset() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, "./d/s", 2, 1).expect("create");
        let t = catalog.open_table(&db, "./d/s").expect("open table");
        assert_eq!(t.spatial_extent(1).expect("extent"), (0.0, 0.0));
        t.note_spatial_extent(1, (2.0, 0.5)).expect("note");
        t.note_spatial_extent(1, (1.0, 3.0)).expect("note");
        t.note_spatial_extent(2, (7.0, 7.0)).expect("note");
        assert_eq!(t.spatial_extent(1).expect("extent"), (2.0, 3.0));
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    let t = catalog.open_table(&db, "./d/s").expect("open table");
    assert_eq!(t.spatial_extent(1).expect("extent"), (2.0, 3.0));
    assert_eq!(t.spatial_extent(2).expect("extent"), (7.0, 7.0));
    // TRUNCATE empties the indexes, so their extents start again from 0.
    catalog.truncate(&db, "./d/s").expect("truncate");
    assert_eq!(t.spatial_extent(1).expect("extent"), (0.0, 0.0));
    t.note_spatial_extent(1, (1.0, 1.0)).expect("note");
    // A table created again under the name starts without extents.
    catalog.drop_table(&db, "./d/s").expect("drop");
    catalog.create(&db, "./d/s", 2, 1).expect("create again");
    let t = catalog.open_table(&db, "./d/s").expect("open table");
    assert_eq!(t.spatial_extent(1).expect("extent"), (0.0, 0.0));
}

#[test]
fn online_build_families_are_published_and_leftovers_dropped_by_the_next_build() {
    use tidesdb_ffi::catalog::IndexSource::{Built, Existing};
    use tidesdb_ffi::catalog::{building_slot, BLOB_INDEX, BUILDING_INDEX};
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), DbOptions::default()).expect("open");
    let catalog = Catalog::open(&db, false).expect("catalog");
    catalog.create(&db, "./d/t", 1, 1).expect("create");
    let shared = catalog.open_table(&db, "./d/t").expect("open");
    let v0 = shared.definition_version();
    assert_ne!(v0, 0);
    assert_eq!(
        catalog.definition_version(&db, "./d/t").expect("version"),
        v0
    );

    // Op indexes naming a family being built.
    assert_eq!(building_slot(BUILDING_INDEX | 1), Some(1));
    assert_eq!(building_slot(BLOB_INDEX), None);
    assert_eq!(building_slot(2), None);

    // A failed online build of two indexes leaves t1.i2 and t1.i3 behind.
    let failed = catalog.create_index_cfs(&db, "./d/t", 2).expect("build");
    shared.set_building(failed.iter().map(|(_, cf)| cf.clone()).collect());
    assert_eq!(
        shared.building_cf(1).map(|cf| cf.name()),
        Some("t1.i3".to_string())
    );
    assert!(shared.building_cf(2).is_none());
    shared.set_building(Vec::new());
    assert!(shared.building_cf(0).is_none());
    assert_eq!(shared.definition_version(), v0, "nothing committed");

    // The next build (of one index) drops both leftovers.
    let built = catalog.create_index_cfs(&db, "./d/t", 1).expect("build");
    assert_eq!(built[0].0, 2);
    assert!(
        db.cf("t1.i3").is_none(),
        "leftover of the failed build dropped"
    );
    catalog
        .alter_indexes(&db, "./d/t", &[Existing(1), Built(0)], &built)
        .expect("commit");
    let v1 = shared.definition_version();
    assert_ne!(v1, v0, "a committed index change changes the version");
    assert_eq!(
        catalog.definition_version(&db, "./d/t").expect("version"),
        v1
    );
    assert_eq!(
        sorted_cfs(&db),
        vec![
            "__catalog",
            "__catalog_mirror",
            "t1",
            "t1.b",
            "t1.i1",
            "t1.i2"
        ]
    );
}

#[test]
fn column_versions_commit_with_the_index_list_and_survive_rename_truncate_and_reopen() {
    use tidesdb_ffi::columns::{ColumnVersions, StoredColumn, COLUMN_BLOB, NEW_COLUMN};
    let dir = tempfile::tempdir().expect("tempdir");
    let cols = |ids: &[u32]| -> Vec<StoredColumn> {
        ids.iter()
            .map(|&id| StoredColumn { id, flags: 0 })
            .collect()
    };
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        let v1 = ColumnVersions::initial(cols(&[0, 1, 2])).expect("v1");
        catalog
            .create_versioned(&db, "./d/t", 0, 1, &CfOptions::default(), Some(v1.clone()))
            .expect("create");
        catalog.create(&db, "./d/old", 0, 1).expect("create old");
        let shared = catalog.open_table(&db, "./d/t").expect("open");
        assert_eq!(shared.columns(), Some(v1.clone()));
        assert_eq!(
            catalog.open_table(&db, "./d/old").expect("old").columns(),
            None
        );
        let before = shared.definition_version();
        // DROP COLUMN 1, ADD a BLOB first: a new version, committed in place.
        let v2 = v1
            .derive(&[(NEW_COLUMN, COLUMN_BLOB), (0, 0), (2, 0)])
            .expect("v2");
        catalog
            .alter_table(&db, "./d/t", &[], &[], Some(v2.clone()))
            .expect("alter");
        assert_eq!(shared.columns(), Some(v2.clone()));
        assert_ne!(shared.definition_version(), before);
        assert_eq!(v2.current_columns()[0].id, 3);
        // An index-only change keeps the columns.
        catalog
            .alter_indexes(&db, "./d/t", &[], &[])
            .expect("alter indexes");
        assert_eq!(shared.columns(), Some(v2.clone()));
        catalog.rename(&db, "./d/t", "./d/u").expect("rename");
        drop(shared);
        drop(catalog);
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    let shared = catalog.open_table(&db, "./d/u").expect("open renamed");
    let v2 = shared.columns().expect("columns after reopen");
    assert_eq!(v2.current, 2);
    assert_eq!(v2.versions.len(), 2);
    // TRUNCATE: no row left, only the current version is kept.
    catalog.truncate(&db, "./d/u").expect("truncate");
    let after = catalog
        .open_table(&db, "./d/u")
        .expect("open")
        .columns()
        .expect("columns");
    assert_eq!(after.current, 2);
    assert_eq!(after.versions.len(), 1);
    assert_eq!(after.current_columns(), v2.current_columns());
}

/// A key provider with one 32-byte key: id 1, version 1.
struct OneKey;

impl tidesdb_core::KeyProvider for OneKey {
    fn latest_version(&self, key_id: u32) -> Option<u32> {
        (key_id == 1).then_some(1)
    }
    fn key(&self, key_id: u32, version: u32) -> Option<Vec<u8>> {
        (key_id == 1 && version == 1).then(|| vec![0x5a; 32])
    }
}

#[test]
fn encrypted_table_without_its_key_is_refused_by_name() {
    use tidesdb_ffi::table::TableOptions;
    let dir = tempfile::tempdir().expect("tempdir");
    let with_key = || DbOptions {
        keys: tidesdb_core::Keyring::new(std::sync::Arc::new(OneKey)),
        ..DbOptions::default()
    };
    let enc = TableOptions {
        compression: 0,
        compression_level: 0,
        bloom_bits_per_key: 10,
        block_size: 4096,
        value_separation_threshold: 0,
        encrypted: 1,
        encryption_key_id: 1,
    }
    .to_cf_options()
    .expect("valid");
    {
        let db = Db::open(dir.path(), with_key()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog
            .create_with(&db, "./d/enc", 1, 1, &enc)
            .expect("create");
        catalog
            .create_with(&db, "./d/plain", 1, 1, &CfOptions::default())
            .expect("create");
        let shared = catalog.open_table(&db, "./d/enc").expect("open");
        assert!(shared
            .cfs()
            .iter()
            .all(|cf| cf.options().encryption_key == Some(1)));
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen without keys");
    let catalog = Catalog::open(&db, false).expect("catalog");
    let err = catalog.open_table(&db, "./d/enc").err().expect("refused");
    assert_eq!(err.status, Status::KeyUnavailable);
    assert!(
        err.message.contains("table d/enc cannot be opened"),
        "{}",
        err.message
    );
    assert!(err.message.contains("encryption key 1"), "{}", err.message);
    catalog
        .open_table(&db, "./d/plain")
        .expect("the others open");
    // Nor can a new encrypted table be created without the key.
    let err = catalog
        .create_with(&db, "./d/enc2", 1, 1, &enc)
        .expect_err("refused");
    assert_eq!(err.status, Status::KeyUnavailable);
}

/// Version 1 of two plain columns, for the rebuilt tables below.
fn two_columns() -> tidesdb_ffi::columns::ColumnVersions {
    use tidesdb_ffi::columns::{ColumnVersions, StoredColumn};
    ColumnVersions::initial(vec![
        StoredColumn { id: 0, flags: 0 },
        StoredColumn { id: 1, flags: 0 },
    ])
    .expect("columns")
}

#[test]
fn rebuild_swaps_the_table_in_one_step_and_keeps_index_order() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), DbOptions::default()).expect("open");
    let catalog = Catalog::open(&db, false).expect("catalog");
    catalog.create(&db, "./d/t", 2, 1).expect("create");
    put_row(&db, &catalog, "./d/t", b"old");
    let shared = catalog.open_table(&db, "./d/t").expect("open");
    // The new definition: old index 2, a new one, old index 1.
    let (meta, cfs) = catalog
        .create_rebuild_cfs(&db, "./d/t", &[2, 0, 1], two_columns())
        .expect("rebuild families");
    assert_eq!(meta.index_nos, vec![2, 3, 1]);
    assert_eq!(cfs.len(), 5); // rows, three indexes, external values
                              // Until the switch the table is the old one.
    assert_eq!(row_count(&db, &catalog, "./d/t"), 1);
    let mut txn = db.begin(Isolation::RepeatableRead);
    txn.put(&cfs[0], b"new1", b"row").expect("put");
    txn.put(&cfs[0], b"new2", b"row").expect("put");
    txn.commit().expect("commit");
    catalog
        .install_rebuilt(&db, "./d/t", &meta)
        .expect("switch");
    // Handles opened before see the new families; the old ones are gone.
    assert_eq!(shared.index_count(), 3);
    assert_eq!(row_count(&db, &catalog, "./d/t"), 2);
    assert_eq!(shared.creation_ranks(), Some(vec![2, 3, 1]));
    let mut names = db.list_cfs();
    names.sort();
    let expected: Vec<String> = ["__catalog", "__catalog_mirror"]
        .iter()
        .map(|s| s.to_string())
        .chain(meta.cf_names())
        .collect();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort();
    assert_eq!(names, expected_sorted);
}

#[test]
fn rebuild_interrupted_before_the_switch_leaves_the_old_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, "./d/t", 1, 1).expect("create");
        put_row(&db, &catalog, "./d/t", b"old");
        let (_meta, cfs) = catalog
            .create_rebuild_cfs(&db, "./d/t", &[1], two_columns())
            .expect("rebuild families");
        let mut txn = db.begin(Isolation::RepeatableRead);
        txn.put(&cfs[0], b"half", b"row").expect("put");
        txn.commit().expect("commit");
        db.close().expect("close"); // the crash: no switch
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    assert_eq!(row_count(&db, &catalog, "./d/t"), 1);
    let mut cfs = db.list_cfs();
    cfs.sort();
    assert_eq!(
        cfs,
        vec!["__catalog", "__catalog_mirror", "t1", "t1.b", "t1.i1"]
    );
}

#[test]
fn rebuild_log_records_written_keys_only_while_it_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), DbOptions::default()).expect("open");
    let catalog = Catalog::open(&db, false).expect("catalog");
    catalog.create(&db, "./d/t", 0, 1).expect("create");
    let shared = catalog.open_table(&db, "./d/t").expect("open");
    shared.note_row_writes([&b"before"[..]].into_iter());
    shared.start_rebuild_log().expect("start");
    assert_eq!(status_of(shared.start_rebuild_log()), Status::Invalid);
    shared.note_row_writes([&b"b"[..], &b"a"[..], &b"b"[..]].into_iter());
    assert_eq!(
        shared.take_rebuild_log(),
        vec![b"a".to_vec(), b"b".to_vec()]
    );
    shared.note_row_writes([&b"c"[..]].into_iter());
    assert_eq!(shared.take_rebuild_log(), vec![b"c".to_vec()]);
    shared.end_rebuild_log();
    shared.note_row_writes([&b"after"[..]].into_iter());
    assert!(shared.take_rebuild_log().is_empty());
    shared.start_rebuild_log().expect("a new rebuild may start");
}

#[test]
fn group_rebuild_switches_every_partition_in_one_transaction() {
    use tidesdb_ffi::columns::{ColumnVersions, StoredColumn};
    let dir = tempfile::tempdir().expect("tempdir");
    let (p0, p1) = ("./d/t#P#p0", "./d/t#P#p1");
    let columns = || ColumnVersions::initial(vec![StoredColumn { id: 0, flags: 0 }]).expect("cols");
    {
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let catalog = Catalog::open(&db, false).expect("catalog");
        catalog.create(&db, p0, 1, 1).expect("create p0");
        catalog.create(&db, p1, 1, 1).expect("create p1");
        put_row(&db, &catalog, p0, b"old0");
        put_row(&db, &catalog, p1, b"old1");
        let (m0, cfs0) = catalog
            .create_rebuild_cfs(&db, p0, &[1], columns())
            .expect("rebuild p0");
        let (m1, _) = catalog
            .create_rebuild_cfs(&db, p1, &[1], columns())
            .expect("rebuild p1");
        let mut txn = db.begin(Isolation::RepeatableRead);
        txn.put(&cfs0[0], b"new0", b"row").expect("put");
        txn.commit().expect("commit");
        // A group naming a missing table switches none of them.
        assert_eq!(
            status_of(catalog.install_rebuilt_group(
                &db,
                &[(p0, &m0), ("./d/missing#P#p1", &m1)],
                Some(("./d/t", b"v1"))
            )),
            Status::NoSuchTable
        );
        assert!(!catalog.is_installed(&db, p0, &m0));
        assert!(!catalog
            .group_switch_committed(&db, "./d/t", b"v1")
            .expect("marker"));
        catalog
            .install_rebuilt_group(&db, &[(p0, &m0), (p1, &m1)], Some(("./d/t", b"v1")))
            .expect("switch");
        assert!(catalog.is_installed(&db, p0, &m0));
        assert!(catalog.is_installed(&db, p1, &m1));
        assert_eq!(row_count(&db, &catalog, p0), 1);
        assert_eq!(row_count(&db, &catalog, p1), 0);
        db.close().expect("close");
    }
    let db = Db::open(dir.path(), DbOptions::default()).expect("reopen");
    let catalog = Catalog::open(&db, false).expect("catalog");
    // What the server's DDL recovery asks, by the partitioned table's path.
    assert!(catalog
        .group_switch_committed(&db, "d/t", b"v1")
        .expect("marker"));
    assert!(!catalog
        .group_switch_committed(&db, "./d/t", b"v2")
        .expect("marker"));
    assert!(!catalog
        .group_switch_committed(&db, "./d/u", b"v1")
        .expect("marker"));
    assert_eq!(row_count(&db, &catalog, p0), 1);
    // Dropping the table's partitions drops the record.
    catalog.drop_table(&db, p0).expect("drop p0");
    assert!(!catalog
        .group_switch_committed(&db, "./d/t", b"v1")
        .expect("marker"));
    catalog.drop_table(&db, p1).expect("drop p1");
}
