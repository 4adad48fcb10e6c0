//! Sets of half-open time intervals `[from, to)`: union, difference, clipping and measure,
//! for "when did a replica lead" questions; and which of a list of intervals overlap, for
//! "did two terms lead at once".

use crate::time::Micros;

/// A set of disjoint, sorted, non-empty intervals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet(Vec<(Micros, Micros)>);

impl IntervalSet {
    /// The union of `spans` (empty or reversed ones are ignored).
    pub fn from_spans(spans: impl IntoIterator<Item = (Micros, Micros)>) -> Self {
        let mut v: Vec<(Micros, Micros)> = spans.into_iter().filter(|(a, b)| a < b).collect();
        v.sort_unstable();
        let mut out: Vec<(Micros, Micros)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        Self(out)
    }

    /// The intervals.
    pub fn spans(&self) -> &[(Micros, Micros)] {
        &self.0
    }

    /// This set without `other`.
    pub fn minus(&self, other: &IntervalSet) -> IntervalSet {
        let mut out = Vec::new();
        let mut j = 0;
        for &(a, b) in &self.0 {
            let mut start = a;
            while j < other.0.len() && other.0[j].1 <= start {
                j += 1;
            }
            let mut k = j;
            while k < other.0.len() && other.0[k].0 < b {
                let (c, d) = other.0[k];
                if c > start {
                    out.push((start, c.min(b)));
                }
                start = start.max(d);
                if start >= b {
                    break;
                }
                k += 1;
            }
            if start < b {
                out.push((start, b));
            }
        }
        IntervalSet(out)
    }

    /// This set within `[from, to)`.
    pub fn clip(&self, from: Micros, to: Micros) -> IntervalSet {
        IntervalSet::from_spans(self.0.iter().map(|&(a, b)| (a.max(from), b.min(to))))
    }

    /// Total length.
    pub fn measure(&self) -> Micros {
        self.0.iter().map(|(a, b)| b - a).sum()
    }

    /// The first instant at or after `t` that is inside, if any.
    pub fn next_covered(&self, t: Micros) -> Option<Micros> {
        let i = self.0.partition_point(|&(_, b)| b <= t);
        self.0.get(i).map(|&(a, _)| a.max(t))
    }
}

/// The pairs of `sorted`'s items (sorted by start) whose spans overlap, as (earlier, later),
/// in the order the later ones start; `span` gives an item's `[start, end)`.
pub fn overlapping_pairs<T>(sorted: &[T], span: impl Fn(&T) -> (Micros, Micros)) -> Vec<(&T, &T)> {
    let mut active: Vec<&T> = Vec::new();
    let mut pairs = Vec::new();
    for later in sorted {
        let (start, _) = span(later);
        active.retain(|earlier| span(earlier).1 > start);
        pairs.extend(active.iter().map(|&earlier| (earlier, later)));
        active.push(later);
    }
    pairs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_pairs_are_those_that_begin_before_an_earlier_one_ends() {
        let spans = [(0, 10), (5, 20), (10, 15), (12, 13), (20, 30)];
        let pairs: Vec<_> = overlapping_pairs(&spans, |&s| s)
            .into_iter()
            .map(|(a, b)| (*a, *b))
            .collect();
        assert_eq!(
            pairs,
            [
                ((0, 10), (5, 20)),
                ((5, 20), (10, 15)),
                ((5, 20), (12, 13)),
                ((10, 15), (12, 13)),
            ]
        );
    }

    #[test]
    fn union_difference_and_lookups() {
        let a = IntervalSet::from_spans([(0, 10), (5, 20), (30, 40), (41, 41)]);
        assert_eq!(a.spans(), &[(0, 20), (30, 40)]);
        let b = IntervalSet::from_spans([(3, 4), (15, 35)]);
        assert_eq!(a.minus(&b).spans(), &[(0, 3), (4, 15), (35, 40)]);
        assert_eq!(a.clip(10, 35).measure(), 15);
        assert_eq!(a.next_covered(25), Some(30));
        assert_eq!(a.next_covered(12), Some(12));
        assert_eq!(a.next_covered(40), None);
    }
}
