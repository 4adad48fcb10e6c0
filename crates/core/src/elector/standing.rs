//! The one way in: whether this replica stands for the lease, as its gates say.

use tokio::sync::watch;

/// What keeps a replica out of the election, named for the step-down of a term it ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Gate {
    /// The step-down reason's stable snake_case label (metrics, JSON).
    pub label: &'static str,
    /// The same in words (logs, `leasehold status`).
    pub says: &'static str,
}

/// What one gate says.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Standing {
    /// This replica may contend, and lead.
    #[default]
    Stands,
    /// Out of the election while `gate` says so; `detail` says why, when the gate knows.
    Out { gate: Gate, detail: Option<String> },
}

impl Standing {
    /// Whether this replica may contend.
    pub fn stands(&self) -> bool {
        matches!(self, Standing::Stands)
    }
}

/// Every gate of one elector, in the order they were added ([`Elector::gates`](super::Elector::gates)).
#[derive(Clone, Default)]
pub struct Gates(Vec<watch::Receiver<Standing>>);

impl Gates {
    pub(super) fn add(&mut self, gate: watch::Receiver<Standing>) {
        self.0.push(gate);
    }

    /// What the gates say now: the first that keeps this replica out, else it stands.
    pub fn standing(&mut self) -> Standing {
        self.0
            .iter_mut()
            .map(|gate| gate.borrow_and_update().clone())
            .find(|s| !s.stands())
            .unwrap_or_default()
    }

    /// Waits until what the gates say satisfies `pred`, and returns it. A gate whose sender is
    /// gone keeps saying what it said last.
    pub async fn wait_until(&mut self, pred: impl Fn(&Standing) -> bool) -> Standing {
        loop {
            let now = self.standing();
            if pred(&now) {
                return now;
            }
            let open: Vec<_> = self
                .0
                .iter_mut()
                .filter(|gate| gate.has_changed().is_ok())
                .map(|gate| Box::pin(gate.changed()))
                .collect();
            if open.is_empty() {
                return std::future::pending().await;
            }
            let _ = futures_util::future::select_all(open).await;
        }
    }
}
