//! Public option types.

/// When WAL writes are made durable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncMode {
    /// Never fsync explicitly (the OS decides). Survives process crashes, not power loss.
    None,
    /// A background thread fsyncs the WAL every `millis` milliseconds.
    Interval { millis: u64 },
    /// `commit()` returns only after an fsync covering its record (group commit).
    Full,
}

/// Per-commit options for [`crate::Txn::commit_with`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CommitOptions {
    /// `true` (the default): durability follows the database's [`SyncMode`]
    /// (in `Full` mode the call returns after an fsync covering the record).
    /// `false`: the record is appended to the WAL (ordered before every later
    /// commit) but the call does not wait for an fsync, whatever the sync
    /// mode. A later synced commit (or `Db::sync_wal`) makes it durable too,
    /// because the WAL is replayed as a prefix.
    pub sync: bool,
}

impl Default for CommitOptions {
    fn default() -> Self {
        CommitOptions { sync: true }
    }
}

/// Database-wide options.
#[derive(Clone, Debug)]
pub struct DbOptions {
    pub sync_mode: SyncMode,
    /// Memtable bytes (per column family) before it is rotated and flushed.
    pub write_buffer_size: usize,
    /// Byte cap of the shared block cache (decoded blocks).
    pub block_cache_size: usize,
    /// Number of background compaction threads (flush has its own thread). Min 1.
    pub background_threads: usize,
    /// Read table blocks and value log records with `O_DIRECT` (aligned
    /// reads that bypass the OS page cache; the block cache still applies).
    /// If the filesystem refuses `O_DIRECT` (`EINVAL` at open or read), reads
    /// silently fall back to the page cache; `Db::direct_reads_active` tells.
    pub use_direct_reads: bool,
    /// Open a damaged directory (like `innodb_force_recovery`). 0: normal. From 1
    /// the database is read-only: the open changes nothing on disk (replayed WAL
    /// stays in memory; no new manifest or WAL segment, no file removed, no
    /// background work) and every write fails with `Error::ReadOnly`. Each level
    /// also skips what levels below it stop at (`Db::recovery_notes` says what):
    /// 1: an unreadable prepared-transaction (`.prep`) file: that prepared
    ///    transaction is left out (its writes were never visible);
    /// 2: a damaged WAL record: replay of its segment stops there (later commits
    ///    of that segment are lost), later segments are replayed;
    /// 3: a damaged manifest: its edits are read up to the damage; a damaged or
    ///    missing `CURRENT`: the newest `MANIFEST-*` file is read.
    /// Damaged table and value log files are set aside at every level, 0 too.
    pub force_recovery: u8,
    /// Where the keys of encrypted files come from (`crypto/`). Without a
    /// provider, encrypted files are refused (`Error::KeyUnavailable`).
    pub keys: crate::crypto::Keyring,
    /// Encrypt new WAL segments and prepared-transaction spill files with
    /// this key id of `keys` (`None`: in the clear). Spill runs are encrypted
    /// under a process-local random key when this is set or their column
    /// family is encrypted.
    pub log_encryption_key: Option<u32>,
    /// Column families whose encryption is set by the caller at every open
    /// rather than fixed at creation (the server's catalog: encrypted while
    /// `tidesdb_encrypt_tables` is on): `(name, key id or None)`. A listed
    /// family that exists gets that key in its options (recorded in the new
    /// manifest as a created family's would be), and its table files written
    /// otherwise are rewritten before `open` returns (`db/encryption.rs`).
    /// Ignored read-only (`force_recovery`): files say how they are written.
    pub family_encryption: Vec<(String, Option<u32>)>,
}

impl Default for DbOptions {
    fn default() -> Self {
        DbOptions {
            sync_mode: SyncMode::Full,
            write_buffer_size: 64 << 20,
            block_cache_size: 64 << 20,
            background_threads: 1,
            use_direct_reads: false,
            force_recovery: 0,
            keys: crate::crypto::Keyring::default(),
            log_encryption_key: None,
            family_encryption: Vec::new(),
        }
    }
}

/// Per-block compression of table files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    Zstd { level: i32 },
}

/// Column family options (persisted in the manifest at creation).
#[derive(Clone, Debug)]
pub struct CfOptions {
    /// Compression of the tables compactions write (level 1 and below); see
    /// [`CfOptions::compression_at`].
    pub compression: Compression,
    /// Bloom filter bits per key (0 disables the filter).
    pub bloom_bits_per_key: u32,
    /// Target uncompressed size of a data block.
    pub block_size: usize,
    /// Values of at least this many bytes are stored in value log files
    /// (separated when the memtable is flushed; tables hold a pointer).
    /// `None` = never.
    pub value_separation_threshold: Option<usize>,
    /// Encrypt the family's table and value log files with this key id of
    /// `DbOptions::keys` (latest version at each write). `None`: in the clear.
    pub encryption_key: Option<u32>,
}

impl CfOptions {
    /// The compression of a table written at `level`. Level 0 (memtable
    /// flushes, spilled commits) is always written uncompressed: it is on the
    /// write path, short-lived (compacted into level 1 soon) and holds the
    /// newest, most read keys; the deeper levels, where nearly all of the data
    /// lives once compacted, carry the family's compression (the layout RocksDB
    /// users configure with `compression_per_level`). Every block records its
    /// own compression, so files of both kinds read alike.
    pub fn compression_at(&self, level: usize) -> Compression {
        if level == 0 {
            Compression::None
        } else {
            self.compression
        }
    }
}

impl Default for CfOptions {
    fn default() -> Self {
        CfOptions {
            compression: Compression::None,
            bloom_bits_per_key: 10,
            block_size: 4096,
            value_separation_threshold: None,
            encryption_key: None,
        }
    }
}

/// Transaction isolation level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// As [`Isolation::ReadCommitted`], and plain reads also see other
    /// transactions' uncommitted writes (InnoDB's READ UNCOMMITTED: the newest
    /// version of a row, committed or not).
    ReadUncommitted,
    ReadCommitted,
    RepeatableRead,
    Serializable,
}

/// Bounds of a transaction iterator. `upper_bound` is exclusive.
#[derive(Clone, Debug, Default)]
pub struct IterOptions {
    pub lower_bound: Option<Vec<u8>>,
    pub upper_bound: Option<Vec<u8>>,
}

/// Statistics of one column family.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CfStats {
    /// Entries in memtables + table files (versions and tombstones included).
    pub approx_keys: u64,
    /// Bytes in memtables + table files.
    pub approx_bytes: u64,
    pub memtable_bytes: u64,
    pub table_files: u64,
    pub immutable_memtables: u64,
    /// Number of files per level (index = level).
    pub files_per_level: Vec<u64>,
    /// Bytes of table files per level (index = level).
    pub bytes_per_level: Vec<u64>,
    /// Bytes the compaction still has to rewrite to bring every level under
    /// its target (an estimate; 0 when no compaction is due).
    pub pending_compaction_bytes: u64,
    /// File names (in the database directory) of the table files per level.
    pub file_names_per_level: Vec<Vec<String>>,
    /// Value log files of the current version.
    pub vlog_files: u64,
    /// Bytes of those files (on disk).
    pub vlog_bytes: u64,
    /// Bytes of their records no table points to any more (reclaimed by GC).
    pub vlog_garbage_bytes: u64,
    /// Of `vlog_files`, the WAL segments kept as value logs (their large
    /// values were written once, to the WAL; see `vlog.rs`).
    pub vlog_wal_files: u64,
}
