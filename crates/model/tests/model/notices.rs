//! What a replica of the model hears on the release channel: a release announced (a waiting
//! follower wakes at once), the data-loss notice (a leader renews at once, a follower tries at
//! once), and a handover's nudge (a leader renews at once).

use leasehold_core::clock::BootInstant;

use crate::mirror::Term;
use crate::replica::{Replica, Role};

impl Replica {
    /// A release of `term` announced on the channel: a waiting follower wakes at once.
    pub fn release_announced(&mut self, now: BootInstant, term: Term) {
        if let Role::Follower { .. } = self.role {
            self.announced = self.observed.is_some_and(|(seen, _)| seen == term);
            self.role = Role::Follower { next_try: now };
        }
    }

    /// The `data-loss` notice on the channel: a leader renews at once (and finds its lease
    /// gone), a follower tries at once, and one whose acquire is in flight tries again right
    /// after it; one pausing after a term sleeps the pause out.
    pub fn told_data_loss(&mut self, now: BootInstant) {
        match self.role {
            Role::Leader(_) => self.nudged(now),
            Role::Follower { .. } => {
                self.announced = false;
                self.role = Role::Follower { next_try: now };
            }
            Role::Acquiring { sent_at, .. } => {
                self.role = Role::Acquiring {
                    sent_at,
                    woken: true,
                }
            }
            // Sitting out, it reads until answered and hears no wake-up.
            Role::Paused { .. } | Role::SittingOut { .. } | Role::Observing { .. } | Role::Done => {
            }
        }
    }

    /// A handover was requested and nudged on the channel: a leader renews at once (and its
    /// renewal reads the request); one whose renewal is in flight renews again after it.
    pub fn nudged(&mut self, now: BootInstant) {
        if let Role::Leader(lead) = &mut self.role {
            if lead.renewing.is_some() {
                lead.nudged = true;
            } else {
                lead.next_renew = lead.next_renew.min(now);
            }
        }
    }
}
