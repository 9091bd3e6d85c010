//! Byte ranges ("pieces") of chunk ranges, and lock-step walks over several piece lists.
//!
//! A chunk range of the IR is contiguous in chunk numbering but not always in memory (with
//! loop slicing each chunk is a slice of its block), so an op's operands are lists of byte
//! ranges. Operands of one op have equal total length but may break at different places;
//! [`zip2`]/[`zip3`] cut them into aligned segments.

use std::ops::Range;

/// Appends `r` to `v`, merging with the previous range when contiguous.
pub fn push_merged(v: &mut Vec<Range<usize>>, r: Range<usize>) {
    if r.is_empty() {
        return;
    }
    if let Some(last) = v.last_mut() {
        if last.end == r.start {
            last.end = r.end;
            return;
        }
    }
    v.push(r);
}

pub fn total(p: &[Range<usize>]) -> usize {
    p.iter().map(|r| r.len()).sum()
}

/// A cursor over a piece list.
struct Cur<'p> {
    p: &'p [Range<usize>],
    i: usize,
    off: usize,
}

impl<'p> Cur<'p> {
    fn new(p: &'p [Range<usize>]) -> Self {
        Cur { p, i: 0, off: 0 }
    }
    /// Remaining length of the current piece (0 at the end).
    fn avail(&mut self) -> usize {
        while self.i < self.p.len() && self.off == self.p[self.i].len() {
            self.i += 1;
            self.off = 0;
        }
        self.p.get(self.i).map_or(0, |r| r.len() - self.off)
    }
    fn take(&mut self, n: usize) -> Range<usize> {
        let s = self.p[self.i].start + self.off;
        self.off += n;
        s..s + n
    }
}

/// Calls `f(a, b)` on aligned segments of two piece lists of equal total length.
pub fn zip2(a: &[Range<usize>], b: &[Range<usize>], mut f: impl FnMut(Range<usize>, Range<usize>)) {
    let (mut x, mut y) = (Cur::new(a), Cur::new(b));
    loop {
        let n = x.avail().min(y.avail());
        if n == 0 {
            return;
        }
        f(x.take(n), y.take(n));
    }
}

/// Calls `f(a, b, c)` on aligned segments of three piece lists of equal total length.
pub fn zip3(
    a: &[Range<usize>],
    b: &[Range<usize>],
    c: &[Range<usize>],
    mut f: impl FnMut(Range<usize>, Range<usize>, Range<usize>),
) {
    let (mut x, mut y, mut z) = (Cur::new(a), Cur::new(b), Cur::new(c));
    loop {
        let n = x.avail().min(y.avail()).min(z.avail());
        if n == 0 {
            return;
        }
        f(x.take(n), y.take(n), z.take(n));
    }
}

#[cfg(test)]
#[allow(clippy::single_range_in_vec_init)]
mod tests {
    use super::*;

    #[test]
    fn zip_aligns_segments() {
        let a = vec![0..3, 10..15];
        let b = vec![100..102, 200..206];
        let mut got = vec![];
        zip2(&a, &b, |x, y| got.push((x, y)));
        assert_eq!(
            got,
            vec![(0..2, 100..102), (2..3, 200..201), (10..15, 201..206)]
        );
        let mut n = 0;
        zip3(&a, &b, &[0..8], |x, y, z| {
            assert_eq!(x.len(), y.len());
            assert_eq!(y.len(), z.len());
            n += x.len();
        });
        assert_eq!(n, 8);
        let mut v = vec![];
        push_merged(&mut v, 0..4);
        push_merged(&mut v, 4..8);
        push_merged(&mut v, 9..9);
        push_merged(&mut v, 10..12);
        assert_eq!(v, vec![0..8, 10..12]);
    }
}
