//! The Sentinels in the model: three of them, each with the node it names as the master, and
//! the rules by which a replica takes their word: where a dial goes and whether a reply counts.
//! The majority is counted by the client's own tally (`leasehold_core::lease::quorum::Tally`).
//!
//! Node 0 is the first master; a Sentinel failover promotes node 1 while node 0 keeps running
//! and writable. Sentinel 0 is deaf: it never learns of the failover. The failover makes
//! Sentinel 1 name node 1; Sentinel 2 learns it in a later step of its own. Sentinels 1 and 2
//! are alike but for that order, so which of them hears first is fixed rather than chosen.

use leasehold_core::lease::quorum::{Addr, Tally, Verdict};

/// How many Sentinels the replicas list.
pub const SENTINELS: usize = 3;

/// The Sentinel that never hears of a failover.
pub const DEAF: u8 = 0;

/// The node a Sentinel failover promotes.
pub const PROMOTED: u8 = 1;

/// How a replica takes the Sentinels' word: the current protocol, or a pre-fix one for the
/// negative controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SentinelWord {
    /// Every dial goes to the node a majority of the Sentinels names, and a reply counts only
    /// if a majority named the node its request went to at the request's send instant.
    #[default]
    Majority,
    /// Before the majority: one Sentinel's word, the one the replica lists first, for the
    /// dial and for the confirmation.
    FirstListed,
    /// Before any confirmation: the dial goes through the Sentinel listed first, and a
    /// connection kept from before a failover keeps reaching its node.
    Unconfirmed,
}

impl SentinelWord {
    /// The word as `LEASEHOLD_MODEL_WITH` spells it.
    pub fn parse(text: &str) -> Option<SentinelWord> {
        match text {
            "majority" => Some(SentinelWord::Majority),
            "first-listed" => Some(SentinelWord::FirstListed),
            "unconfirmed" => Some(SentinelWord::Unconfirmed),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Sentinels {
    /// The node each Sentinel names as the master. Each moves from node 0 to node 1 only, never
    /// back (a higher configuration epoch).
    pub views: [u8; SENTINELS],
    /// Sentinel failovers so far.
    pub failovers: u8,
}

impl Default for Sentinels {
    fn default() -> Sentinels {
        Sentinels {
            views: [0; SENTINELS],
            failovers: 0,
        }
    }
}

/// A node's address as a Sentinel would name it, for the tally.
fn address(node: u8) -> Addr {
    ("10.0.0.1".to_owned(), 6379 + u16::from(node))
}

impl Sentinels {
    /// The node a majority of the Sentinels names, as the client's tally counts it.
    pub fn majority(&self) -> Option<u8> {
        let mut tally = Tally::new(SENTINELS);
        for node in self.views {
            tally.named(address(node));
        }
        match tally.verdict() {
            Verdict::Named((_, port)) => u8::try_from(port.checked_sub(6379)?).ok(),
            Verdict::Open | Verdict::NoMajority => None,
        }
    }

    /// Where a dial goes now, for a replica that lists Sentinel `first` first: `None` when the
    /// rule names no node (no majority), and the dial fails.
    pub fn dial(&self, word: SentinelWord, first: u8) -> Option<u8> {
        match word {
            SentinelWord::Majority => self.majority(),
            SentinelWord::FirstListed | SentinelWord::Unconfirmed => {
                Some(self.views[usize::from(first)])
            }
        }
    }

    /// Whether a request sent to `node` at this instant counts. Asked at the send instant, the
    /// weakest point the client allows (docs/MODEL.md).
    pub fn confirms(&self, word: SentinelWord, first: u8, node: u8) -> bool {
        match word {
            SentinelWord::Majority => self.majority() == Some(node),
            SentinelWord::FirstListed => self.views[usize::from(first)] == node,
            SentinelWord::Unconfirmed => true,
        }
    }

    /// A failover: node 1 is promoted and the first Sentinel that is not deaf names it.
    pub fn fail_over(&mut self) {
        self.failovers += 1;
        self.views[usize::from(DEAF) + 1] = PROMOTED;
    }

    /// The Sentinel that may learn of the failover in a step of its own, if any: the next one
    /// after those that already name the promoted node (the deaf one never does).
    pub fn next_to_learn(&self) -> Option<u8> {
        if self.failovers == 0 {
            return None;
        }
        (0..SENTINELS as u8)
            .filter(|s| *s != DEAF)
            .find(|s| self.views[usize::from(*s)] != PROMOTED)
    }

    pub fn learn(&mut self, sentinel: u8) {
        self.views[usize::from(sentinel)] = PROMOTED;
    }
}

#[test]
fn the_majority_names_the_promoted_node_only_once_a_second_sentinel_has_learnt_it() {
    let mut sentinels = Sentinels::default();
    assert_eq!(
        sentinels.next_to_learn(),
        None,
        "nothing to learn before a failover"
    );
    sentinels.fail_over();
    assert_eq!(sentinels.views, [0, PROMOTED, 0]);
    assert_eq!(sentinels.majority(), Some(0), "one of three is no majority");
    assert_eq!(sentinels.dial(SentinelWord::Majority, 1), Some(0));
    assert_eq!(sentinels.dial(SentinelWord::FirstListed, 1), Some(PROMOTED));
    assert!(sentinels.confirms(SentinelWord::Majority, 1, 0));
    assert!(!sentinels.confirms(SentinelWord::FirstListed, 1, 0));
    assert!(sentinels.confirms(SentinelWord::Unconfirmed, 1, 0));
    assert_eq!(sentinels.next_to_learn(), Some(2));
    sentinels.learn(2);
    assert_eq!(sentinels.majority(), Some(PROMOTED), "two of three are");
    assert!(!sentinels.confirms(SentinelWord::Majority, 0, 0));
    assert!(
        sentinels.confirms(SentinelWord::FirstListed, DEAF, 0),
        "the deaf Sentinel still names the old master"
    );
    assert_eq!(sentinels.next_to_learn(), None, "the deaf one never learns");
}
