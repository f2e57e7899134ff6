//! Finishing the files a job writes (flush, compaction, spilled commit):
//! a table file made durable and opened for reads, with the manifest entry
//! that will list it; a value log file made durable and opened.

use crate::error::Result;
use crate::options::CfOptions;
use crate::table::cache::BlockCache;
use crate::table::sst::{Table, TableBuilder};
use crate::version::manifest::FileMeta;
use std::path::Path;
use std::sync::Arc;

/// A new table file `no` of a column family with options `opts`, to be placed
/// at `level` (which decides its compression), encrypted when the family is.
pub(crate) fn create_table(
    dir: &Path,
    no: u64,
    opts: &CfOptions,
    level: usize,
    keys: &crate::crypto::Keyring,
) -> Result<TableBuilder> {
    let path = crate::table::sst::table_path(dir, no);
    let cipher = crate::crypto::FileCipher::for_new_file_if(keys, opts.encryption_key, &path)?;
    TableBuilder::create(
        path,
        opts.block_size,
        opts.compression_at(level),
        opts.bloom_bits_per_key,
        cipher,
    )
}

/// A value log file written by a job, opened, with its size.
pub(crate) type VlogOutFile = (Arc<crate::vlog::file::VlogFile>, u64);

/// Finishes (fsyncs) the value log of a job and opens it for reading.
pub(crate) fn finish_vlog(
    vo: crate::vlog::file::VlogOut<'_>,
    dir: &Path,
    dio: Option<&Arc<crate::fsutil::DirectIo>>,
    keys: &crate::crypto::Keyring,
) -> Result<Option<VlogOutFile>> {
    match vo.finish()? {
        None => Ok(None),
        Some((no, size)) => {
            match crate::vlog::file::VlogFile::open(
                dir,
                no,
                crate::vlog::file::VlogFormat::Records,
                dio,
                keys,
            ) {
                Ok(f) => Ok(Some((Arc::new(f), size))),
                Err(e) => {
                    let _ = crate::io::remove_file(crate::vlog::file::vlog_path(dir, no));
                    Err(e)
                }
            }
        }
    }
}

pub(crate) fn finish_table(
    b: TableBuilder,
    no: u64,
    cache: &Arc<BlockCache>,
    dio: Option<&Arc<crate::fsutil::DirectIo>>,
    keys: &crate::crypto::Keyring,
) -> Result<(FileMeta, Arc<Table>)> {
    let path = b.path().to_path_buf();
    // A file that cannot be finished (no space, ...) must not stay behind.
    let (size, props) = b.finish().inspect_err(|_| {
        let _ = crate::io::remove_file(&path);
    })?;
    crate::metrics::TABLE_BYTES.add(size);
    let t = Table::open_with(path.clone(), no, cache.clone(), dio, keys).inspect_err(|_| {
        let _ = crate::io::remove_file(&path);
    })?;
    let fm = FileMeta {
        file_no: no,
        size,
        min_seq: props.min_seq,
        max_seq: props.max_seq,
        num_entries: props.num_entries,
        smallest: props.smallest_user().to_vec(),
        largest: props.largest_user().to_vec(),
        encrypted: t.is_encrypted(),
    };
    Ok((fm, Arc::new(t)))
}
