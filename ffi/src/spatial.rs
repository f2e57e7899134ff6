//! SPATIAL indexes: Hilbert-ordered keys and window searches over them.
//!
//! A SPATIAL index is a column family like any secondary index (`t<id>.i<n>`), so
//! it is written atomically with its row by `tdb_apply`. Its entries are ordered by
//! the Hilbert value of their MBR's centre, which keeps entries that are close in
//! the plane mostly close in the key space.
//!
//! ## Format
//! ```text
//! key   = u64 BE hilbert(grid(cx), grid(cy)) ++ primary key encoding
//! value = u8 0x10 (the secondary-entry header, non-unique) ++ MBR
//! MBR   = 4 f64 LE: xmin, xmax, ymin, ymax  (the server's itMBR key image)
//! cx    = xmin if xmin == xmax, else xmin/2 + xmax/2   (same for cy; no overflow)
//! grid(v) = 2^31 + m(v) for v > 0, 2^31 - m(v) otherwise (NaN: 2^32 - 1), where
//!           m(v) = (bits(1 + |v|) - bits(1.0)) >> 31, at most 2^31 - 1 above
//!           the middle (bits = the IEEE-754 bits as u64)
//! hilbert = the order-32 Hilbert curve over the 2^32 x 2^32 grid (`hilbert`)
//! catalog `extent/<table_id u64 BE>` = per spatial index: u32 LE engine index,
//!           f64 LE largest half-extent in x, f64 LE in y; grows only, written
//!           (without waiting for fsync) before the row that grows it, so it is
//!           durable no later than that row
//! ```
//! `grid` is monotone, so a rectangle of the plane is a rectangle of the grid,
//! continuous across 0 (a window around the equator or Greenwich is one compact
//! region), with no assumption about the coordinates' domain (degrees, metres,
//! anything): 2^21 cells per unit around 0, and per binary order of magnitude of
//! 1 + |v| beyond (about 1e-4 at 180, 10 m at 1e7).
//!
//! ## Searches
//! A window search (`HA_READ_MBR_*` with query MBR Q) derives the rectangle of the
//! grid that must hold the centre of every matching entry: Q itself for CONTAIN (S
//! inside Q), Q grown by the index's largest half-extents for INTERSECT, the
//! centres that can reach both sides of Q for WITHIN (S contains Q), Q's centre for
//! EQUAL; widened by one grid cell against rounding. It then walks the index in
//! key order from the first Hilbert value inside the rectangle; an entry whose
//! centre lies outside makes the walk jump (a seek, after a few cheap steps) to
//! the next Hilbert value inside the rectangle (`next_in_rect`), so only the key
//! ranges where data and window meet are read. Entries inside are filtered by the
//! exact MBR predicate on the stored MBR (inclusive, a superset of the server's
//! own MBR and geometry predicates, which it re-evaluates on every row). DISJOINT
//! is not filtered at all: two geometries can be disjoint while their MBRs meet.
use std::collections::HashMap;

use tidesdb_core::TxnIter;

use crate::status::{FfiError, FfiResult, Status};

/// Bytes of the Hilbert prefix of an entry key.
pub const HILBERT_LEN: usize = 8;
/// Bytes of a stored MBR (the last bytes of an entry's value).
pub const MBR_LEN: usize = 32;
/// Levels of the curve: a 2^32 x 2^32 grid.
const ORDER: u32 = 32;
/// Entries stepped over one by one before a jump becomes a seek.
const STEPS_BEFORE_SEEK: u32 = 32;

/// A minimum bounding rectangle (inclusive).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Mbr {
    pub xmin: f64,
    pub xmax: f64,
    pub ymin: f64,
    pub ymax: f64,
}

impl Mbr {
    pub fn from_array(a: [f64; 4]) -> Mbr {
        Mbr {
            xmin: a[0],
            xmax: a[1],
            ymin: a[2],
            ymax: a[3],
        }
    }

    /// The MBR stored in the last [`MBR_LEN`] bytes of an entry value.
    pub fn from_value(value: &[u8]) -> Option<Mbr> {
        let b = value.get(value.len().checked_sub(MBR_LEN)?..)?;
        let f = |i: usize| -> Option<f64> {
            Some(f64::from_le_bytes(
                b.get(i * 8..i * 8 + 8)?.try_into().ok()?,
            ))
        };
        Some(Mbr {
            xmin: f(0)?,
            xmax: f(1)?,
            ymin: f(2)?,
            ymax: f(3)?,
        })
    }

    pub fn center(&self) -> (f64, f64) {
        (mid(self.xmin, self.xmax), mid(self.ymin, self.ymax))
    }

    /// Half the width and height (0 for points; never negative or NaN).
    pub fn half_extent(&self) -> (f64, f64) {
        let h = |lo: f64, hi: f64| {
            let e = hi / 2.0 - lo / 2.0;
            if e > 0.0 {
                e
            } else {
                0.0
            }
        };
        (h(self.xmin, self.xmax), h(self.ymin, self.ymax))
    }

    fn intersects(&self, q: &Mbr) -> bool {
        self.xmin <= q.xmax && self.xmax >= q.xmin && self.ymin <= q.ymax && self.ymax >= q.ymin
    }

    fn contains(&self, q: &Mbr) -> bool {
        self.xmin <= q.xmin && q.xmax <= self.xmax && self.ymin <= q.ymin && q.ymax <= self.ymax
    }
}

fn mid(lo: f64, hi: f64) -> f64 {
    if lo == hi {
        lo
    } else {
        lo / 2.0 + hi / 2.0
    }
}

/// The grid cell of a coordinate: a monotone map of all doubles onto u32 (see
/// Format), 0 at the grid's middle column.
pub fn grid(v: f64) -> u32 {
    const HALF: u32 = 1 << 31;
    if v.is_nan() {
        return u32::MAX;
    }
    // 1 + |v| >= 1, so its bits minus those of 1.0 grow with |v| from 0 (for 0
    // and values below 2^-53) to 2^62 (infinity); keep the top 31 of them.
    let h = ((v.abs() + 1.0).to_bits() - 1.0f64.to_bits()) >> 31;
    if v > 0.0 {
        HALF + (h.min(u64::from(HALF) - 1) as u32)
    } else {
        HALF - (h.min(u64::from(HALF)) as u32)
    }
}

/// Curve position -> (rx, ry) in the cell's own orientation.
const POS_XY: [(u32, u32); 4] = [(0, 0), (0, 1), (1, 1), (1, 0)];

/// Orientation of a cell: its children's bits are complemented (flip) and / or
/// exchanged (swap) before the curve's base pattern applies; both commute.
#[derive(Clone, Copy, Debug)]
struct Orient {
    flip: bool,
    swap: bool,
}

impl Orient {
    /// Raw bits <-> oriented bits (an involution).
    fn apply(self, bx: u32, by: u32) -> (u32, u32) {
        let (mut a, mut b) = (bx, by);
        if self.flip {
            a ^= 1;
            b ^= 1;
        }
        if self.swap {
            std::mem::swap(&mut a, &mut b);
        }
        (a, b)
    }

    /// The orientation of the child at oriented bits (rx, ry).
    fn child(self, rx: u32, ry: u32) -> Orient {
        Orient {
            flip: self.flip ^ (ry == 0 && rx == 1),
            swap: self.swap ^ (ry == 0),
        }
    }
}

const ROOT: Orient = Orient {
    flip: false,
    swap: false,
};

fn hilbert_order(order: u32, x: u32, y: u32) -> u64 {
    let mut o = ROOT;
    let mut d = 0u64;
    for level in (0..order).rev() {
        let (rx, ry) = o.apply((x >> level) & 1, (y >> level) & 1);
        d = (d << 2) | u64::from((3 * rx) ^ ry);
        o = o.child(rx, ry);
    }
    d
}

fn hilbert_inverse_order(order: u32, d: u64) -> (u32, u32) {
    let mut o = ROOT;
    let (mut x, mut y) = (0u32, 0u32);
    for level in (0..order).rev() {
        let (rx, ry) = POS_XY[((d >> (2 * level)) & 3) as usize];
        let (bx, by) = o.apply(rx, ry);
        x |= bx << level;
        y |= by << level;
        o = o.child(rx, ry);
    }
    (x, y)
}

/// The position of grid cell (x, y) on the curve.
pub fn hilbert(x: u32, y: u32) -> u64 {
    hilbert_order(ORDER, x, y)
}

/// The grid cell at position d of the curve.
pub fn hilbert_inverse(d: u64) -> (u32, u32) {
    hilbert_inverse_order(ORDER, d)
}

/// The key prefix of an entry with this MBR.
pub fn entry_key(mbr: &Mbr) -> [u8; HILBERT_LEN] {
    let (cx, cy) = mbr.center();
    hilbert(grid(cx), grid(cy)).to_be_bytes()
}

/// A rectangle of grid cells, bounds inclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    pub x0: u32,
    pub x1: u32,
    pub y0: u32,
    pub y1: u32,
}

impl Rect {
    pub fn holds(&self, x: u32, y: u32) -> bool {
        self.x0 <= x && x <= self.x1 && self.y0 <= y && y <= self.y1
    }
}

/// A quadtree cell on the curve: `level` 0 is the whole grid.
#[derive(Clone, Copy, Debug)]
struct Cell {
    level: u32,
    ox: u64,
    oy: u64,
    orient: Orient,
    /// The cell's curve positions start at `prefix << 2 * (ORDER - level)`.
    prefix: u64,
}

impl Cell {
    const ROOT: Cell = Cell {
        level: 0,
        ox: 0,
        oy: 0,
        orient: ROOT,
        prefix: 0,
    };

    fn size(&self) -> u64 {
        1u64 << (ORDER - self.level)
    }

    fn start(&self) -> u128 {
        u128::from(self.prefix) << (2 * (ORDER - self.level))
    }

    fn end(&self) -> u128 {
        self.start() + (1u128 << (2 * (ORDER - self.level))) - 1
    }

    fn child(&self, pos: usize) -> Cell {
        let (rx, ry) = POS_XY[pos];
        let (bx, by) = self.orient.apply(rx, ry);
        let half = self.size() / 2;
        Cell {
            level: self.level + 1,
            ox: self.ox + u64::from(bx) * half,
            oy: self.oy + u64::from(by) * half,
            orient: self.orient.child(rx, ry),
            prefix: (self.prefix << 2) | pos as u64,
        }
    }

    /// Cells of `r` inside this cell (0 when they do not meet).
    fn overlap(&self, r: &Rect) -> (u64, u64) {
        let (x0, x1) = (self.ox, self.ox + self.size() - 1);
        let (y0, y1) = (self.oy, self.oy + self.size() - 1);
        let w = u64::from(r.x1)
            .min(x1)
            .saturating_add(1)
            .saturating_sub(u64::from(r.x0).max(x0));
        let h = u64::from(r.y1)
            .min(y1)
            .saturating_add(1)
            .saturating_sub(u64::from(r.y0).max(y0));
        (w, h)
    }

    fn inside(&self, r: &Rect) -> bool {
        let s = self.size() - 1;
        u64::from(r.x0) <= self.ox
            && self.ox + s <= u64::from(r.x1)
            && u64::from(r.y0) <= self.oy
            && self.oy + s <= u64::from(r.y1)
    }
}

fn next_in(cell: &Cell, h: u64, r: &Rect) -> Option<u64> {
    let (w, ht) = cell.overlap(r);
    if w == 0 || ht == 0 || cell.end() < u128::from(h) {
        return None;
    }
    if cell.inside(r) {
        // start <= h or start fits in u64: start <= end < 2^64.
        return Some(h.max(cell.start() as u64));
    }
    (0..4).find_map(|pos| next_in(&cell.child(pos), h, r))
}

/// The smallest curve position >= h whose cell lies in `r`.
pub fn next_in_rect(h: u64, r: &Rect) -> Option<u64> {
    next_in(&Cell::ROOT, h, r)
}

fn area_before(cell: &Cell, h: u64, r: &Rect) -> f64 {
    let (w, ht) = cell.overlap(r);
    if w == 0 || ht == 0 || cell.start() >= u128::from(h) {
        return 0.0;
    }
    if cell.end() < u128::from(h) {
        return w as f64 * ht as f64;
    }
    (0..4).map(|pos| area_before(&cell.child(pos), h, r)).sum()
}

/// The share of `r`'s cells whose curve position is below h (0..=1).
pub fn share_before(h: u64, r: &Rect) -> f64 {
    let total = (f64::from(r.x1 - r.x0) + 1.0) * (f64::from(r.y1 - r.y0) + 1.0);
    area_before(&Cell::ROOT, h, r) / total
}

/// The server's `HA_READ_MBR_*` search modes (`enum tdb_mbr_mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// S meets Q.
    Intersect,
    /// Q contains S.
    Contain,
    /// S contains Q.
    Within,
    /// S equals Q.
    Equal,
    /// S and Q are disjoint: every entry (see the module doc).
    Disjoint,
}

impl Mode {
    pub fn from_raw(mode: u32) -> FfiResult<Mode> {
        Ok(match mode {
            0 => Mode::Intersect,
            1 => Mode::Contain,
            2 => Mode::Within,
            3 => Mode::Equal,
            4 => Mode::Disjoint,
            other => {
                return Err(FfiError::new(
                    Status::Invalid,
                    format!("unknown MBR search mode {other}"),
                ))
            }
        })
    }

    fn matches(self, s: &Mbr, q: &Mbr) -> bool {
        match self {
            Mode::Intersect => s.intersects(q),
            Mode::Contain => q.contains(s),
            Mode::Within => s.contains(q),
            Mode::Equal => s == q,
            Mode::Disjoint => true,
        }
    }
}

/// The grid cells `lo..=hi` widened by one cell on each side; None if empty.
fn cell_span(lo: f64, hi: f64) -> Option<(u32, u32)> {
    let (a, b) = (grid(lo).saturating_sub(1), grid(hi).saturating_add(1));
    (a <= b && !lo.is_nan() && !hi.is_nan()).then_some((a, b))
}

/// The grid rectangle holding the centre of every entry that can match; None when
/// nothing can.
pub fn search_rect(mode: Mode, q: &Mbr, extent: (f64, f64)) -> Option<Rect> {
    let (ex, ey) = extent;
    let ((x0, x1), (y0, y1)) = match mode {
        Mode::Disjoint => {
            return Some(Rect {
                x0: 0,
                x1: u32::MAX,
                y0: 0,
                y1: u32::MAX,
            })
        }
        Mode::Contain => ((q.xmin, q.xmax), (q.ymin, q.ymax)),
        Mode::Intersect => ((q.xmin - ex, q.xmax + ex), (q.ymin - ey, q.ymax + ey)),
        Mode::Within => ((q.xmax - ex, q.xmin + ex), (q.ymax - ey, q.ymin + ey)),
        Mode::Equal => {
            let (cx, cy) = q.center();
            ((cx, cx), (cy, cy))
        }
    };
    let (x0, x1) = cell_span(x0, x1)?;
    let (y0, y1) = cell_span(y0, y1)?;
    Some(Rect { x0, x1, y0, y1 })
}

/// A window search in progress on a cursor.
#[derive(Clone, Debug)]
pub struct SpatialScan {
    mode: Mode,
    q: Mbr,
    rect: Option<Rect>,
}

fn hilbert_of_key(key: &[u8]) -> FfiResult<u64> {
    key.get(..HILBERT_LEN)
        .and_then(|b| b.try_into().ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| {
            FfiError::new(
                Status::Corruption,
                format!("a spatial index key of {} bytes", key.len()),
            )
        })
}

impl SpatialScan {
    pub fn new(mode: Mode, q: Mbr, extent: (f64, f64)) -> SpatialScan {
        SpatialScan {
            mode,
            q,
            rect: search_rect(mode, &q, extent),
        }
    }

    /// Positions `iter` on the first match: after `after` if given, else from the
    /// start. The iterator is left invalid when there is none.
    pub fn start(&self, iter: &mut TxnIter, after: Option<&[u8]>) -> FfiResult<()> {
        let Some(rect) = self.rect else {
            iter.seek_to_last();
            if iter.valid() {
                iter.next();
            }
            return Ok(());
        };
        match after {
            Some(k) => {
                crate::cursor::seek(iter, crate::cursor::SeekMode::GtPrefix, k);
            }
            None => match next_in_rect(0, &rect) {
                Some(h) => iter.seek(&h.to_be_bytes()),
                None => return self.finish(iter),
            },
        }
        self.settle(iter)
    }

    /// Moves to the next match.
    pub fn next(&self, iter: &mut TxnIter) -> FfiResult<()> {
        if iter.valid() {
            iter.next();
        }
        self.settle(iter)
    }

    fn finish(&self, iter: &mut TxnIter) -> FfiResult<()> {
        iter.seek_to_last();
        if iter.valid() {
            iter.next();
        }
        iter.status()?;
        Ok(())
    }

    /// From the iterator's entry on, finds the first match.
    fn settle(&self, iter: &mut TxnIter) -> FfiResult<()> {
        let Some(rect) = self.rect else {
            return self.finish(iter);
        };
        loop {
            iter.status()?;
            if !iter.valid() {
                return Ok(());
            }
            let h = hilbert_of_key(iter.key())?;
            let (x, y) = hilbert_inverse(h);
            if rect.holds(x, y) {
                let s = Mbr::from_value(iter.value()).ok_or_else(|| {
                    FfiError::new(Status::Corruption, "a spatial index entry without an MBR")
                })?;
                if self.mode.matches(&s, &self.q) {
                    return Ok(());
                }
                iter.next();
                continue;
            }
            // Outside: jump to the next curve position inside the rectangle.
            let Some(target) = h.checked_add(1).and_then(|n| next_in_rect(n, &rect)) else {
                return self.finish(iter);
            };
            let target_key = target.to_be_bytes();
            let mut steps = 0;
            while steps < STEPS_BEFORE_SEEK && iter.valid() && iter.key() < &target_key[..] {
                iter.next();
                steps += 1;
            }
            if iter.valid() && iter.key() < &target_key[..] {
                iter.seek(&target_key);
            }
        }
    }

    /// Counts matches from the start, up to `cap`; when the cap is reached the
    /// count is extrapolated from the share of the rectangle walked so far.
    pub fn estimate(&self, iter: &mut TxnIter, cap: u64) -> FfiResult<u64> {
        let Some(rect) = self.rect else {
            return Ok(0);
        };
        self.start(iter, None)?;
        let mut n = 0u64;
        while iter.valid() {
            n += 1;
            if n >= cap {
                let h = hilbert_of_key(iter.key())?;
                let share = share_before(h.saturating_add(1), &rect).max(1e-9);
                return Ok(((n as f64) / share).min(u64::MAX as f64 / 2.0) as u64);
            }
            self.next(iter)?;
        }
        iter.status()?;
        Ok(n)
    }
}

/// The catalog value of a table's spatial extents (see Format).
pub fn encode_extents(extents: &HashMap<u32, (f64, f64)>) -> Vec<u8> {
    let mut keys: Vec<_> = extents.keys().copied().collect();
    keys.sort_unstable();
    let mut v = Vec::with_capacity(keys.len() * 20);
    for k in keys {
        let (ex, ey) = extents[&k];
        v.extend_from_slice(&k.to_le_bytes());
        v.extend_from_slice(&ex.to_le_bytes());
        v.extend_from_slice(&ey.to_le_bytes());
    }
    v
}

pub fn decode_extents(bytes: &[u8]) -> FfiResult<HashMap<u32, (f64, f64)>> {
    if !bytes.len().is_multiple_of(20) {
        return Err(FfiError::new(
            Status::Corruption,
            format!("spatial extents of {} bytes", bytes.len()),
        ));
    }
    let mut out = HashMap::new();
    for c in bytes.chunks_exact(20) {
        let get8 = |i: usize| -> f64 {
            let mut a = [0u8; 8];
            a.copy_from_slice(&c[i..i + 8]);
            f64::from_le_bytes(a)
        };
        let mut k = [0u8; 4];
        k.copy_from_slice(&c[..4]);
        out.insert(u32::from_le_bytes(k), (get8(4), get8(12)));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curve_is_a_bijection_of_adjacent_cells() {
        let order = 5;
        let n = 1u32 << order;
        let mut seen = vec![false; (n * n) as usize];
        let mut prev: Option<(u32, u32)> = None;
        for d in 0..u64::from(n * n) {
            let (x, y) = hilbert_inverse_order(order, d);
            assert!(x < n && y < n);
            assert_eq!(hilbert_order(order, x, y), d);
            assert!(!seen[(y * n + x) as usize]);
            seen[(y * n + x) as usize] = true;
            if let Some((px, py)) = prev {
                assert_eq!(px.abs_diff(x) + py.abs_diff(y), 1, "step {d}");
            }
            prev = Some((x, y));
        }
        // Full order: round trips at the corners and elsewhere.
        for &(x, y) in &[
            (0, 0),
            (u32::MAX, 0),
            (0, u32::MAX),
            (u32::MAX, u32::MAX),
            (12345, 987654321),
        ] {
            assert_eq!(hilbert_inverse(hilbert(x, y)), (x, y));
        }
    }

    #[test]
    fn grid_is_monotone() {
        let vals = [
            f64::NEG_INFINITY,
            -1e300,
            -180.0,
            -1.0,
            -1e-300,
            -0.0,
            0.0,
            1e-300,
            0.5,
            1.0,
            179.99,
            180.0,
            1e300,
            f64::INFINITY,
        ];
        for w in vals.windows(2) {
            assert!(grid(w[0]) <= grid(w[1]), "{} {}", w[0], w[1]);
        }
        assert_eq!(grid(-0.0), grid(0.0));
        assert!(grid(-1.0) < grid(1.0));
    }

    #[test]
    fn next_in_rect_matches_brute_force() {
        // Use a small sub-square of the full-order grid near the origin.
        let r = Rect {
            x0: 3,
            x1: 9,
            y0: 5,
            y1: 6,
        };
        let mut inside: Vec<u64> = Vec::new();
        for x in 0..16 {
            for y in 0..16 {
                if r.holds(x, y) {
                    inside.push(hilbert(x, y));
                }
            }
        }
        inside.sort_unstable();
        for h in 0..300u64 {
            let expect = inside.iter().copied().find(|&d| d >= h);
            assert_eq!(next_in_rect(h, &r), expect, "h={h}");
        }
        let total = inside.len() as f64;
        for (i, &d) in inside.iter().enumerate() {
            assert!((share_before(d, &r) - i as f64 / total).abs() < 1e-12);
        }
    }

    #[test]
    fn windows_hold_every_matching_centre() {
        let q = Mbr::from_array([-10.0, 10.0, 40.0, 50.0]);
        let ext = (2.0, 1.0);
        let cases = [
            (
                Mbr::from_array([-12.0, -9.0, 49.5, 50.5]),
                Mode::Intersect,
                true,
            ),
            (
                Mbr::from_array([-13.0, -11.0, 45.0, 45.0]),
                Mode::Intersect,
                false,
            ),
            (
                Mbr::from_array([-10.0, -10.0, 40.0, 40.0]),
                Mode::Contain,
                true,
            ),
            (
                Mbr::from_array([-10.0, 10.1, 40.0, 40.0]),
                Mode::Contain,
                false,
            ),
            (
                Mbr::from_array([-10.0, 10.0, 40.0, 50.0]),
                Mode::Equal,
                true,
            ),
            (
                Mbr::from_array([-10.0, 10.0, 40.0, 50.0]),
                Mode::Within,
                true,
            ),
            (
                Mbr::from_array([-9.0, 10.0, 40.0, 50.0]),
                Mode::Within,
                false,
            ),
            (
                Mbr::from_array([100.0, 101.0, 0.0, 1.0]),
                Mode::Disjoint,
                true,
            ),
        ];
        for (s, mode, expect) in cases {
            let ext = if mode == Mode::Within {
                (10.0, 5.0)
            } else {
                ext
            };
            assert_eq!(mode.matches(&s, &q), expect, "{s:?} {mode:?}");
            if expect {
                let r = search_rect(mode, &q, ext).expect("window");
                let (cx, cy) = s.center();
                assert!(r.holds(grid(cx), grid(cy)), "{s:?} {mode:?}");
            }
        }
        // Nothing can contain Q when no entry is as large.
        assert!(search_rect(Mode::Within, &q, (1.0, 1.0)).is_none());
    }

    /// Window searches over a real column family return exactly the brute-force
    /// matches, whatever the coordinates (negative, tiny, huge, on the grid's
    /// edges) and extents.
    #[test]
    fn scans_match_brute_force() {
        use tidesdb_core::{CfOptions, Db, DbOptions, Isolation, IterOptions};
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), DbOptions::default()).expect("open");
        let cf = db.create_cf("s", CfOptions::default()).expect("cf");
        // A small deterministic generator (xorshift).
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let special = [
            0.0, -0.0, -180.0, 180.0, -90.0, 90.0, 1e-300, -1e-300, 1e300, -1e300,
        ];
        let coord = |r: &mut dyn FnMut() -> u64| -> f64 {
            match r() % 10 {
                0 => special[(r() % special.len() as u64) as usize],
                1..=2 => (r() % 2001) as f64 / 100.0 - 10.0,
                _ => (r() % 36001) as f64 / 100.0 - 180.0,
            }
        };
        let mut rows: Vec<Mbr> = Vec::new();
        let mut extent = (0.0f64, 0.0f64);
        let mut txn = db.begin(Isolation::RepeatableRead);
        for i in 0..3000u32 {
            let (x, y) = (coord(&mut rnd), coord(&mut rnd));
            let (w, h) = if rnd() % 3 == 0 {
                ((rnd() % 500) as f64 / 100.0, (rnd() % 500) as f64 / 100.0)
            } else {
                (0.0, 0.0)
            };
            let m = Mbr::from_array([x, x + w, y, y + h]);
            let he = m.half_extent();
            extent = (extent.0.max(he.0), extent.1.max(he.1));
            let mut key = entry_key(&m).to_vec();
            key.extend_from_slice(&i.to_be_bytes());
            let mut value = vec![0x10u8];
            for f in [m.xmin, m.xmax, m.ymin, m.ymax] {
                value.extend_from_slice(&f.to_le_bytes());
            }
            txn.put(&cf, &key, &value).expect("put");
            rows.push(m);
        }
        txn.commit().expect("commit");
        let mut txn = db.begin(Isolation::RepeatableRead);
        let modes = [Mode::Intersect, Mode::Contain, Mode::Within, Mode::Equal];
        for round in 0..400 {
            let (x, y) = (coord(&mut rnd), coord(&mut rnd));
            let (w, h) = ((rnd() % 4000) as f64 / 100.0, (rnd() % 4000) as f64 / 100.0);
            let mode = modes[round % modes.len()];
            let q = if mode == Mode::Equal || mode == Mode::Within {
                // Query with a stored MBR (or a point inside one) so that there are hits.
                let s = rows[(rnd() % rows.len() as u64) as usize];
                if mode == Mode::Equal {
                    s
                } else {
                    let (cx, cy) = s.center();
                    Mbr::from_array([cx, cx, cy, cy])
                }
            } else {
                Mbr::from_array([x, x + w, y, y + h])
            };
            let mut expect: Vec<u32> = (0..rows.len() as u32)
                .filter(|&i| mode.matches(&rows[i as usize], &q))
                .collect();
            expect.sort_unstable();
            let scan = SpatialScan::new(mode, q, extent);
            let mut it = txn.iter(&cf, IterOptions::default()).expect("iter");
            scan.start(&mut it, None).expect("start");
            let mut got = Vec::new();
            while it.valid() {
                let k = it.key();
                got.push(u32::from_be_bytes(k[8..12].try_into().expect("id")));
                scan.next(&mut it).expect("next");
            }
            // A search resumed after any entry it returned goes on with the rest.
            if got.len() > 1 {
                let cut = (rnd() % got.len() as u64) as usize;
                let mut it = txn.iter(&cf, IterOptions::default()).expect("iter");
                scan.start(&mut it, None).expect("start");
                for _ in 0..cut {
                    scan.next(&mut it).expect("next");
                }
                let after = it.key().to_vec();
                let mut it = txn.iter(&cf, IterOptions::default()).expect("iter");
                scan.start(&mut it, Some(&after)).expect("resume");
                let mut rest = Vec::new();
                while it.valid() {
                    rest.push(u32::from_be_bytes(it.key()[8..12].try_into().expect("id")));
                    scan.next(&mut it).expect("next");
                }
                assert_eq!(rest, got[cut + 1..].to_vec(), "round {round}: resumed");
            }
            got.sort_unstable();
            assert_eq!(got, expect, "round {round}: {mode:?} {q:?}");
            let est = SpatialScan::new(mode, q, extent)
                .estimate(&mut it, 1_000_000)
                .expect("estimate");
            assert_eq!(est, expect.len() as u64);
        }
    }

    #[test]
    fn extents_round_trip() {
        let mut m = HashMap::new();
        m.insert(2, (0.5, 0.0));
        m.insert(1, (3.0, 4.0));
        assert_eq!(decode_extents(&encode_extents(&m)).expect("decode"), m);
        assert!(decode_extents(&[1, 2, 3]).is_err());
    }
}
