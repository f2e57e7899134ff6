//! Compiles the C++ handler shim (`handler-shim/*.cc`) against the private headers of
//! the exact MariaDB server this plugin will be loaded into.
//!
//! The headers come from the server's source package, extracted by
//! `scripts/setup-mariadb.sh` (run by `make plugin`); this script never touches the
//! network. Where they live: `$MARIADB_SRC_DIR` (the extracted tree, holding `sql/`,
//! `include/`, `VERSION`), default `target/mariadb-src/tree`. The server's own generated
//! headers (`my_config.h`, `mysql_version.h`, ...) come from `$MARIADB_SERVER_INCLUDE`,
//! default `/usr/include/mariadb/server` (Debian's libmariadbd-dev).
//!
//! `MARIADB=11.8` (the Makefile's variable) changes both defaults to the Debian 13 root
//! that `scripts/setup-mariadb-11.8.sh` makes: `target/mariadb-src-11.8/tree` and
//! `target/mariadb-src-11.8/server-include`. The shim learns which server it is built
//! for from those headers alone (`MYSQL_VERSION_ID`, in `handler-shim/server_compat.h`).
//!
//! Debian builds the server WITH_WSREP (Galera), which changes THD's layout and makes
//! `sql_class.h` include wsrep-lib's headers: they are extracted too, so the shim sees
//! exactly the structures of the server it is loaded into.
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=MARIADB_SRC_DIR");
    println!("cargo:rerun-if-env-changed=MARIADB_SERVER_INCLUDE");
    println!("cargo:rerun-if-env-changed=MARIADB");
    println!("cargo:rerun-if-changed=handler-shim");

    let manifest_dir = PathBuf::from(env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let series = env::var("MARIADB").unwrap_or_else(|_| "10.11".to_string());
    let (default_src, default_include) = match series.as_str() {
        "10.11" => (
            manifest_dir.join("target/mariadb-src/tree"),
            PathBuf::from("/usr/include/mariadb/server"),
        ),
        "11.8" => (
            manifest_dir.join("target/mariadb-src-11.8/tree"),
            manifest_dir.join("target/mariadb-src-11.8/server-include"),
        ),
        other => fail(&format!(
            "MARIADB={other}: the supported servers are 10.11 and 11.8 (README, Supported servers)"
        )),
    };
    let src_dir = env::var_os("MARIADB_SRC_DIR")
        .map(PathBuf::from)
        .unwrap_or(default_src);
    let server_include = env::var_os("MARIADB_SERVER_INCLUDE")
        .map(PathBuf::from)
        .unwrap_or(default_include);

    let installed = read_installed_version(&server_include);
    let source = read_source_version(&src_dir);
    if installed != source {
        fail(&format!(
            "the MariaDB source headers in {} are version {source}, but the installed server \
             ({}/mysql_version.h) is {installed}. The plugin must be built against the exact \
             server version. Run `make setup` (scripts/setup-mariadb.sh) to install matching \
             packages and headers.",
            src_dir.display(),
            server_include.display()
        ));
    }
    if !(source.starts_with("10.11.") || source.starts_with("11.8.")) {
        fail(&format!(
            "the MariaDB headers in {} are version {source}; this plugin supports the 10.11 \
             and 11.8 series (handler-shim/server_compat.h holds their differences)",
            src_dir.display()
        ));
    }
    if !source.starts_with(&format!("{series}.")) {
        fail(&format!(
            "MARIADB={series} but the headers in {} are MariaDB {source}",
            src_dir.display()
        ));
    }
    println!(
        "cargo:rerun-if-changed={}",
        src_dir.join("VERSION").display()
    );
    println!(
        "cargo:rerun-if-changed={}",
        server_include.join("mysql_version.h").display()
    );

    let out_dir = PathBuf::from(env::var("OUT_DIR").expect("set by cargo"));
    let generated = out_dir.join("generated-include");
    fs::create_dir_all(&generated).unwrap_or_else(|e| fail(&format!("mkdir: {e}")));
    let probes_in = src_dir.join("include/probes_mysql_nodtrace.h.in");
    let probes = fs::read_to_string(&probes_in)
        .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", probes_in.display())));
    write_file(&generated.join("probes_mysql_nodtrace.h"), &probes);

    let mut sources: Vec<PathBuf> = fs::read_dir(manifest_dir.join("handler-shim"))
        .unwrap_or_else(|e| fail(&format!("cannot list handler-shim/: {e}")))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|ext| ext == "cc"))
        .collect();
    sources.sort();

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .pic(true)
        .include(&generated)
        .include(&server_include)
        .include(src_dir.join("include"))
        .include(src_dir.join("sql"))
        .include(src_dir.join("wsrep-lib/include"))
        .include(src_dir.join("wsrep-lib/wsrep-API/v26"))
        .include(manifest_dir.join("ffi/include"))
        .include(manifest_dir.join("handler-shim"))
        .define("MYSQL_DYNAMIC_PLUGIN", None)
        .define("MYSQL_SERVER", None)
        .define("HAVE_CONFIG_H", None)
        .define("DBUG_OFF", None)
        .define("_FILE_OFFSET_BITS", "64")
        // The server headers are not warning-clean under -Wall; our own code is checked
        // with the same flags in `make lint-shim`.
        .warnings(false)
        .flag_if_supported("-Wno-deprecated-declarations");
    for s in &sources {
        build.file(s);
    }
    build.compile("tidesdb_handler_shim");
}

fn read_installed_version(server_include: &Path) -> String {
    let path = server_include.join("mysql_version.h");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| {
        fail(&format!(
            "cannot read {}: {e}. Install Debian's libmariadbd-dev for the server version in \
             use (`make setup` does).",
            path.display()
        ))
    });
    text.lines()
        .find_map(|l| l.strip_prefix("#define MYSQL_SERVER_VERSION"))
        .and_then(|rest| rest.trim().trim_matches('"').split('-').next())
        .map(str::to_string)
        .unwrap_or_else(|| fail(&format!("no MYSQL_SERVER_VERSION in {}", path.display())))
}

fn read_source_version(src_dir: &Path) -> String {
    let path = src_dir.join("VERSION");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| {
        fail(&format!(
            "cannot read {}: {e}. The MariaDB source headers are missing: run `make setup` \
             (scripts/setup-mariadb.sh) or point MARIADB_SRC_DIR at an extracted source tree \
             of the installed server version.",
            path.display()
        ))
    });
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim_start_matches('=').trim().to_string())
            .unwrap_or_default()
    };
    format!(
        "{}.{}.{}",
        field("MYSQL_VERSION_MAJOR"),
        field("MYSQL_VERSION_MINOR"),
        field("MYSQL_VERSION_PATCH")
    )
}

fn write_file(path: &Path, text: &str) {
    if fs::read_to_string(path).ok().as_deref() != Some(text) {
        fs::write(path, text)
            .unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", path.display())));
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("error: {msg}");
    panic!("{msg}");
}
