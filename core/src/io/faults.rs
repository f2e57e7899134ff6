//! Fault injection for the engine's own file operations (see `io`).
//!
//! A test arms a [`Plan`] for one directory: the `nth` operation of one
//! [`Op`] kind on a path under that directory (optionally only from one call
//! site, `file:line` in core's sources) fails with the plan's [`Fault`].
//! Operations on other directories are never touched, so tests running in
//! parallel in one process do not see each other's faults. [`record`] counts
//! the operations and their call sites without failing any, to learn which
//! sites a workload reaches.
//!
//! Cost when nothing is armed: one relaxed atomic load per operation.

use std::collections::BTreeMap;
use std::panic::Location;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// A kind of file operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Op {
    /// Opening or creating a file (or a directory, for its fsync).
    Open,
    /// Writing bytes (write, pwrite, pwritev).
    Write,
    /// Reading bytes (read, pread).
    Read,
    /// fsync / fdatasync of a file or a directory.
    Sync,
    /// rename.
    Rename,
    /// unlink of a file, removal of a directory tree.
    Remove,
    /// ftruncate (`set_len`).
    SetLen,
    /// link (a hard link).
    Link,
}

impl Op {
    /// Every kind, for tests that try each in turn.
    pub const ALL: [Op; 8] = [
        Op::Open,
        Op::Write,
        Op::Read,
        Op::Sync,
        Op::Rename,
        Op::Remove,
        Op::SetLen,
        Op::Link,
    ];
}

/// What an armed operation does instead of succeeding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Fault {
    /// Fails with `EIO`; nothing is done.
    Eio,
    /// Fails with `ENOSPC`; nothing is done.
    Enospc,
    /// (writes only) The first half of the bytes reach the file, then the
    /// write fails with `ENOSPC`, as a write into a filling disk does.
    ShortWrite,
    /// (writes only) A crash in the middle of the write: the first half of
    /// the bytes reach the file, the call fails with `EIO`, and from then on
    /// every operation under the plan's directory fails with `EIO` (the
    /// process is dead: nothing it does reaches the disk any more) until
    /// [`disarm`]. The test then drops the database and reopens it.
    Torn,
}

impl Fault {
    pub const ALL: [Fault; 4] = [Fault::Eio, Fault::Enospc, Fault::ShortWrite, Fault::Torn];

    /// Whether this fault means anything for `op`.
    pub fn applies_to(self, op: Op) -> bool {
        match self {
            Fault::Eio | Fault::Enospc => true,
            Fault::ShortWrite | Fault::Torn => op == Op::Write,
        }
    }
}

/// One armed fault.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Only operations on paths under this directory count.
    pub dir: PathBuf,
    pub op: Op,
    pub fault: Fault,
    /// The fault hits the `nth` (1-based) counted operation.
    pub nth: u64,
    /// If set, only operations from this call site (`file:line`, as
    /// [`SiteCount::site`] names it) count.
    pub site: Option<String>,
}

/// How often one call site ran one kind of operation (see [`record`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SiteCount {
    pub op: Op,
    /// `file:line` of the call in core's sources.
    pub site: String,
    pub count: u64,
}

struct State {
    plan: Option<Plan>,
    record_dir: Option<PathBuf>,
    seen: u64,
    fired: bool,
    crashed: bool,
    sites: BTreeMap<(Op, String), u64>,
}

static ARMED: AtomicBool = AtomicBool::new(false);
static STATE: Mutex<State> = Mutex::new(State {
    plan: None,
    record_dir: None,
    seen: 0,
    fired: false,
    crashed: false,
    sites: BTreeMap::new(),
});

fn state() -> std::sync::MutexGuard<'static, State> {
    // A test that panicked while holding the lock leaves plain data behind.
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Arms `plan` (replacing any plan or recording).
pub fn arm(plan: Plan) {
    let mut s = state();
    s.plan = Some(plan);
    s.record_dir = None;
    s.seen = 0;
    s.fired = false;
    s.crashed = false;
    s.sites.clear();
    ARMED.store(true, Ordering::SeqCst);
}

/// Counts, without failing anything, the operations on paths under `dir`
/// per kind and call site; [`recorded`] returns them.
pub fn record(dir: &Path) {
    let mut s = state();
    s.plan = None;
    s.record_dir = Some(dir.to_path_buf());
    s.seen = 0;
    s.fired = false;
    s.crashed = false;
    s.sites.clear();
    ARMED.store(true, Ordering::SeqCst);
}

/// The call sites counted since [`record`].
pub fn recorded() -> Vec<SiteCount> {
    state()
        .sites
        .iter()
        .map(|((op, site), count)| SiteCount {
            op: *op,
            site: site.clone(),
            count: *count,
        })
        .collect()
}

/// Whether the armed plan's fault has happened.
pub fn fired() -> bool {
    state().fired
}

/// Removes the plan (and a simulated crash's effect) or the recording.
pub fn disarm() {
    let mut s = state();
    ARMED.store(false, Ordering::SeqCst);
    s.plan = None;
    s.record_dir = None;
    s.crashed = false;
    s.fired = false;
    s.seen = 0;
}

/// What the operation must do instead of its work.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Injected {
    /// Fail with this errno, doing nothing.
    Fail(i32),
    /// Write the first half, then fail with this errno.
    Partial(i32),
}

/// The fault (if any) for an operation of kind `op` on `path` from `site`.
#[inline]
pub(crate) fn check(op: Op, path: &Path, site: &'static Location<'static>) -> Option<Injected> {
    if !ARMED.load(Ordering::Relaxed) {
        return None;
    }
    check_armed(op, path, site)
}

#[cold]
fn check_armed(op: Op, path: &Path, site: &'static Location<'static>) -> Option<Injected> {
    let mut s = state();
    if let Some(dir) = &s.record_dir {
        if path.starts_with(dir) {
            let name = site_name(site);
            *s.sites.entry((op, name)).or_insert(0) += 1;
        }
        return None;
    }
    let plan = s.plan.as_ref()?;
    if !path.starts_with(&plan.dir) {
        return None;
    }
    if s.crashed {
        return Some(Injected::Fail(libc::EIO));
    }
    if s.fired || plan.op != op {
        return None;
    }
    if plan
        .site
        .as_ref()
        .is_some_and(|want| *want != site_name(site))
    {
        return None;
    }
    let (nth, fault) = (plan.nth, plan.fault);
    s.seen += 1;
    if s.seen != nth {
        return None;
    }
    s.fired = true;
    Some(match fault {
        Fault::Eio => Injected::Fail(libc::EIO),
        Fault::Enospc => Injected::Fail(libc::ENOSPC),
        Fault::ShortWrite if op == Op::Write => Injected::Partial(libc::ENOSPC),
        Fault::Torn if op == Op::Write => {
            s.crashed = true;
            Injected::Partial(libc::EIO)
        }
        Fault::ShortWrite | Fault::Torn => Injected::Fail(libc::EIO),
    })
}

/// `file:line` of a call site, the file relative to the crate's `src/`.
fn site_name(site: &Location<'_>) -> String {
    let file = site.file();
    let file = file.rsplit_once("src/").map_or(file, |(_, f)| f);
    format!("{file}:{}", site.line())
}
