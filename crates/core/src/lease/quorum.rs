//! Counting the Sentinels' answers: which master a majority of them names, if any.
//!
//! Pure: the connection asks every Sentinel at once and feeds each answer in as it comes;
//! [`Tally::verdict`] says whether a majority named one address, whether one still can, or
//! whether no address can reach a majority any more (too many disagreed or did not answer).
//! Why a majority: docs/DESIGN.md, "Sentinel".

/// A master's address as a Sentinel names it.
pub type Addr = (String, u16);

/// The answers of `count` Sentinels, as they come.
#[derive(Debug)]
pub struct Tally {
    count: usize,
    named: Vec<(Addr, usize)>,
    failed: Vec<String>,
}

/// What the answers so far decide.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A majority named this address.
    Named(Addr),
    /// No address has a majority yet, and one still can.
    Open,
    /// No address can reach a majority whatever the others answer.
    NoMajority,
}

impl Tally {
    pub fn new(count: usize) -> Self {
        Self {
            count,
            named: Vec::new(),
            failed: Vec::new(),
        }
    }

    /// How many Sentinels must name one address: more than half of those configured.
    pub fn majority(&self) -> usize {
        self.count / 2 + 1
    }

    /// Whether `refused` Sentinels that refused leasehold alone (its password, or a command)
    /// keep any majority out (the others could not make one even all agreeing): then the
    /// refusal is the fault, not one Sentinel down beside a refusing one, which a term outlives.
    pub fn refused_a_majority(&self, refused: usize) -> bool {
        self.count.saturating_sub(refused) < self.majority()
    }

    /// One Sentinel named `addr`.
    pub fn named(&mut self, addr: Addr) {
        match self.named.iter_mut().find(|(named, _)| *named == addr) {
            Some((_, votes)) => *votes += 1,
            None => self.named.push((addr, 1)),
        }
    }

    /// One Sentinel gave no usable answer (`why` says which and what happened).
    pub fn failed(&mut self, why: String) {
        self.failed.push(why);
    }

    pub fn verdict(&self) -> Verdict {
        let majority = self.majority();
        if let Some((addr, _)) = self.named.iter().find(|(_, votes)| *votes >= majority) {
            return Verdict::Named(addr.clone());
        }
        let answered = self.failed.len() + self.named.iter().map(|(_, v)| v).sum::<usize>();
        let best = self.named.iter().map(|(_, v)| *v).max().unwrap_or(0);
        if best + self.count.saturating_sub(answered) >= majority {
            Verdict::Open
        } else {
            Verdict::NoMajority
        }
    }

    /// What the Sentinels said, for an error message: each address with its count, then each
    /// failure.
    pub fn describe(&self) -> String {
        let named = self
            .named
            .iter()
            .map(|((host, port), votes)| format!("{votes} named {host}:{port}"));
        let parts: Vec<String> = named.chain(self.failed.iter().cloned()).collect();
        if parts.is_empty() {
            "no Sentinel answered".to_owned()
        } else {
            parts.join("; ")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(port: u16) -> Addr {
        ("10.0.0.1".to_owned(), port)
    }

    enum Answer {
        Names(u16),
        Fails,
    }
    use Answer::{Fails, Names};

    #[test]
    fn a_master_counts_once_more_than_half_of_the_sentinels_name_it() {
        let rows: &[(usize, &[Answer], Verdict, &str)] = &[
            (
                1,
                &[Names(1)],
                Verdict::Named(addr(1)),
                "one Sentinel is its own majority",
            ),
            (
                3,
                &[Names(1)],
                Verdict::Open,
                "one of three is not a majority",
            ),
            (
                3,
                &[Names(1), Names(1)],
                Verdict::Named(addr(1)),
                "two of three are",
            ),
            (3, &[Names(1), Names(2)], Verdict::Open, "the third decides"),
            (
                3,
                &[Names(1), Names(2), Names(3)],
                Verdict::NoMajority,
                "three different answers: nobody has two",
            ),
            (
                3,
                &[Fails, Fails],
                Verdict::NoMajority,
                "two of three silent: one answer cannot make a majority",
            ),
            (
                3,
                &[Fails, Names(1)],
                Verdict::Open,
                "one down, the last can still agree",
            ),
            (
                3,
                &[Fails, Names(1), Names(1)],
                Verdict::Named(addr(1)),
                "a frozen Sentinel does not stop the other two",
            ),
            (
                3,
                &[Names(1), Names(2), Fails],
                Verdict::NoMajority,
                "a split with one silent: no master",
            ),
            (
                2,
                &[Names(1), Fails],
                Verdict::NoMajority,
                "of two Sentinels both must agree",
            ),
            (
                4,
                &[Names(1), Names(1), Names(2)],
                Verdict::Open,
                "of four, two is not more than half",
            ),
            (
                5,
                &[Names(1), Names(1), Names(2), Names(2), Names(1)],
                Verdict::Named(addr(1)),
                "three of five",
            ),
            (0, &[], Verdict::NoMajority, "no Sentinel at all"),
        ];
        for (count, answers, expected, why) in rows {
            let mut tally = Tally::new(*count);
            for answer in *answers {
                match answer {
                    Names(port) => tally.named(addr(*port)),
                    Fails => tally.failed("sentinel: no answer".to_owned()),
                }
            }
            assert_eq!(tally.verdict(), *expected, "{why}: {}", tally.describe());
        }
    }

    #[test]
    fn the_description_counts_each_address_and_lists_each_failure() {
        let mut tally = Tally::new(3);
        assert_eq!(tally.describe(), "no Sentinel answered");
        tally.named(addr(1));
        tally.named(addr(2));
        tally.named(addr(1));
        tally.failed("sentinel 127.0.0.1:26379: refused".to_owned());
        assert_eq!(
            tally.describe(),
            "2 named 10.0.0.1:1; 1 named 10.0.0.1:2; sentinel 127.0.0.1:26379: refused"
        );
    }

    #[test]
    fn a_password_refused_by_sentinels_is_the_fault_only_when_they_keep_a_majority_out() {
        // (Sentinels, how many refused) -> the refusal is the fault
        let cases = [
            ((3, 0), false),
            ((3, 1), false),
            ((3, 2), true),
            ((3, 3), true),
            ((5, 2), false),
            ((5, 3), true),
        ];
        for ((count, refused), want) in cases {
            let tally = Tally::new(count);
            assert_eq!(
                tally.refused_a_majority(refused),
                want,
                "{count}, {refused}"
            );
        }
    }
}
