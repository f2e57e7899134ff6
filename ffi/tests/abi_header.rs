//! `include/tidesdb_ffi.h` is the single source of the ABI: every function it declares
//! must be exported by this crate under the same name, and nothing exported may be
//! missing from it.
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

fn header_functions() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let text = fs::read_to_string(root.join("include/tidesdb_ffi.h")).expect("header");
    let is_ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut names = BTreeSet::new();
    let mut rest = text.as_str();
    while let Some(pos) = rest.find("tdb_") {
        let before = rest[..pos].chars().next_back();
        let tail = &rest[pos..];
        let end = tail.find(|c: char| !is_ident(c)).unwrap_or(tail.len());
        let (name, after) = tail.split_at(end);
        // A declaration: an identifier right before '(' (not a type or enum value).
        if before.is_none_or(|c| !is_ident(c)) && after.trim_start().starts_with('(') {
            names.insert(name.to_string());
        }
        rest = after;
    }
    names
}

fn exported_functions() -> BTreeSet<String> {
    // Every .rs file under src/, module folders included.
    let mut files = Vec::new();
    let mut dirs = vec![Path::new(env!("CARGO_MANIFEST_DIR")).join("src")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(dir).expect("src dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let mut names = BTreeSet::new();
    for file in files {
        let text = fs::read_to_string(file).expect("source");
        for line in text.lines() {
            if let Some(rest) = line.split("extern \"C\" fn ").nth(1) {
                if line.trim_start().starts_with("pub") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| *c != '(' && *c != '<')
                        .collect();
                    names.insert(name);
                }
            }
        }
    }
    names
}

#[test]
fn header_and_exports_agree() {
    let declared = header_functions();
    let exported = exported_functions();
    let missing: Vec<_> = declared.difference(&exported).collect();
    let undeclared: Vec<_> = exported.difference(&declared).collect();
    assert!(
        missing.is_empty(),
        "declared in the header, not exported: {missing:?}"
    );
    assert!(
        undeclared.is_empty(),
        "exported, not declared in the header: {undeclared:?}"
    );
    assert!(declared.len() > 30, "parsed only {} names", declared.len());
}
