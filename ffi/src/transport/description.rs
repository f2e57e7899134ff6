//! The `.cfg` file of an exported table: what the `.tdb` file beside it holds and
//! the definition it fits (InnoDB's `.cfg` plays the same part for its `.ibd`).
//!
//! ## Format
//! UTF-8 text, one `name value` pair a line, in this order (values are decimal,
//! hexadecimal bytes, or `none`):
//!
//! ```text
//! tidesdb-export 1
//! table <the server's table path, ./db/t>
//! families <number of sections: rows, each secondary index, external values>
//! entries <number of entries in the .tdb file>
//! bytes <size of the .tdb file>
//! crc32 <crc32 of the .tdb file's records, hex, as in its end record>
//! encryption none | <key id> <key version>
//! columns none | <hex: the column definition versions (format in columns.rs)>
//! autoinc none | <hex: the catalog's AUTO_INCREMENT counter value>
//! extent none | <hex: the catalog's SPATIAL extents value>
//! definition <number of lines that follow>
//! <one line per column, index and table property, as the shim describes them>
//! end
//! ```
//!
//! A file without its `end` line (a copy cut short) is refused.
//!
//! The definition lines are the shim's (`handler-shim/transport.cc`): the engine
//! only compares them, line by line, with those of the importing table.
use crate::status::{FfiError, FfiResult, Status};

const HEADER: &str = "tidesdb-export 1";

/// The contents of a `.cfg` file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Description {
    pub table: String,
    pub families: u32,
    pub entries: u64,
    pub bytes: u64,
    pub crc: u32,
    pub encryption: Option<(u32, u32)>,
    pub columns: Option<Vec<u8>>,
    pub autoinc: Option<Vec<u8>>,
    pub extent: Option<Vec<u8>>,
    pub definition: Vec<String>,
}

fn hex(bytes: &Option<Vec<u8>>) -> String {
    match bytes {
        None => "none".to_string(),
        Some(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
    }
}

fn unhex(s: &str) -> Option<Option<Vec<u8>>> {
    if s == "none" {
        return Some(None);
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()
        .map(Some)
}

impl Description {
    pub fn encode(&self) -> String {
        let mut s = String::new();
        s.push_str(HEADER);
        s.push('\n');
        s.push_str(&format!("table {}\n", self.table));
        s.push_str(&format!("families {}\n", self.families));
        s.push_str(&format!("entries {}\n", self.entries));
        s.push_str(&format!("bytes {}\n", self.bytes));
        s.push_str(&format!("crc32 {:08x}\n", self.crc));
        match self.encryption {
            None => s.push_str("encryption none\n"),
            Some((id, v)) => s.push_str(&format!("encryption {id} {v}\n")),
        }
        s.push_str(&format!("columns {}\n", hex(&self.columns)));
        s.push_str(&format!("autoinc {}\n", hex(&self.autoinc)));
        s.push_str(&format!("extent {}\n", hex(&self.extent)));
        s.push_str(&format!("definition {}\n", self.definition.len()));
        for line in &self.definition {
            s.push_str(line);
            s.push('\n');
        }
        s.push_str("end\n");
        s
    }

    /// Parses a `.cfg` file's text (`file` names it in errors).
    pub fn decode(file: &str, text: &str) -> FfiResult<Description> {
        let bad = |what: &str| {
            FfiError::new(
                Status::Corruption,
                format!("{file} is not a TidesDB export description ({what})"),
            )
        };
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err(bad("first line"));
        }
        let mut field = |name: &str| -> FfiResult<String> {
            let line = lines.next().ok_or_else(|| bad(name))?;
            line.strip_prefix(name)
                .and_then(|v| v.strip_prefix(' '))
                .map(str::to_string)
                .ok_or_else(|| bad(name))
        };
        let table = field("table")?;
        let families = field("families")?.parse().map_err(|_| bad("families"))?;
        let entries = field("entries")?.parse().map_err(|_| bad("entries"))?;
        let bytes = field("bytes")?.parse().map_err(|_| bad("bytes"))?;
        let crc = u32::from_str_radix(&field("crc32")?, 16).map_err(|_| bad("crc32"))?;
        let enc = field("encryption")?;
        let encryption = if enc == "none" {
            None
        } else {
            let mut it = enc.split(' ').map(str::parse::<u32>);
            match (it.next(), it.next(), it.next()) {
                (Some(Ok(id)), Some(Ok(v)), None) => Some((id, v)),
                _ => return Err(bad("encryption")),
            }
        };
        let columns = unhex(&field("columns")?).ok_or_else(|| bad("columns"))?;
        let autoinc = unhex(&field("autoinc")?).ok_or_else(|| bad("autoinc"))?;
        let extent = unhex(&field("extent")?).ok_or_else(|| bad("extent"))?;
        let n: usize = field("definition")?
            .parse()
            .map_err(|_| bad("definition"))?;
        let definition: Vec<String> = lines.by_ref().take(n).map(str::to_string).collect();
        if definition.len() != n {
            return Err(bad("definition lines"));
        }
        if lines.next() != Some("end") {
            return Err(bad("no end line: an incomplete copy?"));
        }
        Ok(Description {
            table,
            families,
            entries,
            bytes,
            crc,
            encryption,
            columns,
            autoinc,
            extent,
            definition,
        })
    }
}

/// Why the exported definition `exported` does not fit the table's `table`
/// (None: it fits): the first line that differs, both versions.
pub fn definition_mismatch(table: &[String], exported: &[String]) -> Option<String> {
    for i in 0..table.len().max(exported.len()) {
        match (table.get(i), exported.get(i)) {
            (Some(a), Some(b)) if a == b => {}
            (Some(a), Some(b)) => {
                return Some(format!(
                    "the table has \"{a}\" where the exported table had \"{b}\""
                ))
            }
            (Some(a), None) => {
                return Some(format!(
                    "the table has \"{a}\", the exported table had no more"
                ))
            }
            (None, Some(b)) => {
                return Some(format!(
                    "the exported table had \"{b}\", the table has no more"
                ))
            }
            (None, None) => {}
        }
    }
    None
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn description_roundtrip_and_mismatch() {
        let d = Description {
            table: "./test/t1".into(),
            families: 3,
            entries: 42,
            bytes: 1234,
            crc: 0xdead_beef,
            encryption: Some((2, 1)),
            columns: Some(vec![1, 0, 255]),
            autoinc: None,
            extent: Some(vec![]),
            definition: vec!["column a int".into(), "index PRIMARY".into()],
        };
        let text = d.encode();
        assert_eq!(Description::decode("t1.cfg", &text).unwrap(), d);
        assert!(Description::decode("t1.cfg", &text[..text.len() - 3]).is_err());
        assert!(Description::decode("t1.cfg", "garbage").is_err());
        let a = vec!["column a int".to_string()];
        let b = vec!["column a bigint".to_string()];
        assert_eq!(definition_mismatch(&a, &a), None);
        assert!(definition_mismatch(&a, &b).unwrap().contains("bigint"));
        assert!(definition_mismatch(&a, &[]).is_some());
    }
}
