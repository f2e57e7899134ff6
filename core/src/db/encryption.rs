//! Whether a column family's encrypted data can be read with the keys the
//! database has (`Db::check_encryption`): the server asks it when it opens
//! a table, so a table whose key is missing is refused by name while the
//! others work.

use crate::db::database::Db;
use crate::error::{Error, Result};
use crate::options::CfOptions;
use crate::version::levels::Cf;

impl Db {
    /// A family to be created with `opts` can write its files: its key, if
    /// it has one, is available.
    pub(crate) fn check_new_encryption(&self, name: &str, opts: &CfOptions) -> Result<()> {
        let Some(key_id) = opts.encryption_key else {
            return Ok(());
        };
        let inner = self.inner();
        match inner.opts.keys.latest_version(key_id) {
            Some(_) => Ok(()),
            None => Err(Error::KeyUnavailable {
                file: inner.dir.join(name),
                key_id,
                key_version: 0,
                detail: "the key management plugin has no such key".into(),
            }),
        }
    }

    /// `Ok` if every table file of `cf` opened with its key and the family's
    /// own key (latest version), if it has one, is available; else
    /// `Error::KeyUnavailable` naming a file (or the family) and the key. (A
    /// family in the clear may still have encrypted files: one whose key was
    /// taken off, `DbOptions::family_encryption`, until they are rewritten.)
    pub fn check_encryption(&self, cf: &Cf) -> Result<()> {
        let inner = self.inner();
        for f in cf.inner.current().levels.all() {
            if let Some(b) = &f.table.broken {
                if let Some((id, version)) = b.key {
                    return Err(Error::KeyUnavailable {
                        file: f.table.path.clone(),
                        key_id: id,
                        key_version: version,
                        detail: b
                            .reason
                            .rsplit_once(": ")
                            .map_or_else(|| b.reason.clone(), |(_, d)| d.to_string()),
                    });
                }
            }
        }
        let Some(key_id) = cf.inner.opts.encryption_key else {
            return Ok(());
        };
        match inner.opts.keys.latest_version(key_id) {
            Some(_) => Ok(()),
            None => Err(Error::KeyUnavailable {
                file: inner.dir.join(cf.name()),
                key_id,
                key_version: 0,
                detail: "the key management plugin has no such key".into(),
            }),
        }
    }
}

/// `DbOptions::family_encryption` at open, before the families are opened:
/// each listed family that exists takes the key given, so its new files
/// (and the manifest started at this open) follow it. A key that is not
/// available is refused here, naming the family and the key.
pub(crate) fn set_family_encryption(
    dir: &std::path::Path,
    state: &mut crate::version::manifest::State,
    opts: &crate::options::DbOptions,
) -> Result<()> {
    for (name, key_id) in &opts.family_encryption {
        let Some(meta) = state.cfs.values_mut().find(|m| &m.name == name) else {
            continue;
        };
        if let Some(id) = *key_id {
            if opts.keys.latest_version(id).is_none() {
                return Err(Error::KeyUnavailable {
                    file: dir.join(name),
                    key_id: id,
                    key_version: 0,
                    detail: "the key management plugin has no such key".into(),
                });
            }
        }
        meta.opts.encryption_key = *key_id;
    }
    Ok(())
}

impl Db {
    /// Rewrites the table files of each `DbOptions::family_encryption` family
    /// that are not written with its key (after the setting changed, or a
    /// crash in an earlier rewrite), then starts a new manifest so the old
    /// one's records of the rewritten files (an unencrypted file's key range)
    /// are gone. A family with a quarantined file is left as it is (the
    /// damage is reported where its reads fail).
    pub(crate) fn rewrite_for_family_encryption(&self) -> Result<()> {
        let inner = self.inner();
        if inner.opts.force_recovery > 0 {
            return Ok(());
        }
        let mut rewritten = false;
        for (name, _) in &inner.opts.family_encryption {
            let Some(cf) = self.cf(name) else { continue };
            let want = cf.inner.opts.encryption_key;
            let sv = cf.inner.current();
            let files: Vec<_> = sv.levels.all().collect();
            if files.iter().any(|f| f.table.broken.is_some())
                || files.iter().all(|f| f.table.encryption_key_id() == want)
            {
                continue;
            }
            inner
                .compaction()
                .compact_range_files(&cf.inner, None, None, None)?;
            rewritten = true;
        }
        if rewritten {
            inner.roll_manifest()?;
        }
        Ok(())
    }
}
