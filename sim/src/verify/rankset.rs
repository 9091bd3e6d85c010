//! A set of ranks as a fixed-width bitset (one bit per rank of the schedule).

use std::fmt;

#[derive(Clone, PartialEq, Eq, Hash)]
pub struct RankSet {
    words: Box<[u64]>,
}

impl RankSet {
    pub fn empty(n: u32) -> Self {
        Self {
            words: vec![0; (n as usize).div_ceil(64).max(1)].into_boxed_slice(),
        }
    }
    pub fn single(n: u32, r: u32) -> Self {
        let mut s = Self::empty(n);
        s.words[(r / 64) as usize] |= 1 << (r % 64);
        s
    }
    pub fn all(n: u32) -> Self {
        let mut s = Self::empty(n);
        for r in 0..n {
            s.words[(r / 64) as usize] |= 1 << (r % 64);
        }
        s
    }
    pub fn union(&self, o: &Self) -> Self {
        Self {
            words: self
                .words
                .iter()
                .zip(o.words.iter())
                .map(|(a, b)| a | b)
                .collect(),
        }
    }
    /// Ranks in both sets, ascending.
    pub fn intersection(&self, o: &Self) -> Vec<u32> {
        let mut v = Vec::new();
        for (i, (a, b)) in self.words.iter().zip(o.words.iter()).enumerate() {
            let mut w = a & b;
            while w != 0 {
                let t = w.trailing_zeros();
                v.push(i as u32 * 64 + t);
                w &= w - 1;
            }
        }
        v
    }
    pub fn ranks(&self) -> Vec<u32> {
        self.intersection(self)
    }
    pub fn len(&self) -> u32 {
        self.words.iter().map(|w| w.count_ones()).sum()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Compact form: `{0-3,5}`.
impl fmt::Display for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.ranks();
        let mut parts = Vec::new();
        let mut i = 0;
        while i < r.len() {
            let mut j = i;
            while j + 1 < r.len() && r[j + 1] == r[j] + 1 {
                j += 1;
            }
            parts.push(if j == i {
                r[i].to_string()
            } else {
                format!("{}-{}", r[i], r[j])
            });
            i = j + 1;
        }
        write!(f, "{{{}}}", parts.join(","))
    }
}

impl fmt::Debug for RankSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}
