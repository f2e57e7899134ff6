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

    /// `Ok` if `cf` is in the clear, or its key (latest version) is available
    /// and every table file of it opened with its key; else
    /// `Error::KeyUnavailable` naming a file (or the family) and the key.
    pub fn check_encryption(&self, cf: &Cf) -> Result<()> {
        let Some(key_id) = cf.inner.opts.encryption_key else {
            return Ok(());
        };
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
