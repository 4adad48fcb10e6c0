//! The properties the checker verifies on every state: safety (always), the runs a
//! configuration's faults promise (sometimes), and liveness where scheduling is fair
//! (eventually).

use stateright::Property;

use crate::config::{Config, instant};
use crate::link::Health;
use crate::mirror::Term;
use crate::replica::{Replica, Role};
use crate::sentinels::PROMOTED;
use crate::system::{Msg, State, System};

/// Liveness with a sick replica beside the healthy ones (docs/DESIGN.md, "Gray failures").
pub const HEALTHY_LEADS: &str =
    "a healthy replica leads within two lease durations and keeps leading";
/// The late replica's unanswered acquire took the lease (its outcome was truly unknown).
pub const UNKNOWN_WON: &str = "an unanswered acquire wins a term";
/// An observe answers a replica sitting out with a term of its own that it never led.
pub const UNKNOWN_FOUND: &str = "an observe finds a term its replica never led";
/// The refused replica led, and a refusal ended its term.
pub const REFUSED_ENDED: &str = "a refused renewal ends a term";

impl State {
    /// Whether the run is over (the horizon reached, nothing in flight, nobody due) with a
    /// healthy replica's guard passing in a term it won within two lease durations. True only
    /// in a run's last state: stateright reads an `eventually` property at a path's end and
    /// does not tell a state reached again by another path apart, so a property that a run
    /// could meet early and lose later would hide that run.
    fn healthy_leads_to_the_end(&self, config: &Config) -> bool {
        let over = self.time >= config.horizon
            && self.net.is_empty()
            && self
                .replicas
                .iter()
                .all(|r| !r.due(r.now(self.time), config.max_terms));
        over && self.replicas.iter().any(|r| match r.role {
            Role::Leader(lead) => {
                r.health == Health::Healthy
                    && r.check_passes(self.time)
                    && lead.acquired_at <= instant(0).saturating_add(r.timing().lease_duration * 2)
            }
            _ => false,
        })
    }
}

impl System {
    pub fn checked_properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::<Self>::always("at most one replica's guard passes", |m, s: &State| {
                !m.first(0, s.passing().len() > 1)
            }),
            Property::<Self>::always("tokens of successive terms increase", |m, s: &State| {
                !m.first(1, s.token_regressed)
            }),
            Property::<Self>::always(
                "no message of one term changes another term",
                |m, s: &State| !m.first(2, s.stale_write),
            ),
        ];
        if self.config.max_terms >= 2 {
            properties.push(Property::<Self>::sometimes(
                "a replica leads a second term",
                |m, s: &State| {
                    m.first(
                        3,
                        s.replicas
                            .iter()
                            .any(|r| r.terms >= 2 && matches!(r.role, Role::Leader(_))),
                    )
                },
            ));
        }
        if self.config.restarts_losing_data > 0 {
            // The horizon reaches past the cooldown a new dataset starts with.
            properties.push(Property::<Self>::sometimes(
                "a replica leads after Redis lost its data",
                |m, s: &State| {
                    let on_new_data = s.redis.restarts_losing_data > 0
                        && s.replicas.iter().any(|r| s.leads_on(&s.redis, r));
                    m.first(5, on_new_data)
                },
            ));
        }
        if self.config.restarts_losing_data > 0 && self.config.timings_differ() {
            // The case the cooldown must cover beyond the finder's own lease duration.
            properties.push(Property::<Self>::sometimes(
                "Redis loses its data while a longer term than another replica's is valid",
                |m, s: &State| m.first(7, s.lost_under_longer),
            ));
        }
        if self.config.handovers > 0 {
            properties.push(Property::<Self>::sometimes(
                "a handover completes",
                |m, s: &State| m.first(4, s.handover_completed),
            ));
        }
        if self.config.sentinel_failovers > 0 {
            properties.push(Property::<Self>::sometimes(
                "a replica leads on the promoted node",
                // Its term is the one the promoted node's lease key holds, and its last call
                // was answered there.
                |m, s: &State| {
                    let there = |r: &Replica| match (r.role, &s.promoted) {
                        (Role::Leader(lead), Some(node)) => {
                            r.link.node == PROMOTED
                                && lead.renewing.is_none()
                                && s.leads_on(node, r)
                        }
                        _ => false,
                    };
                    m.first(6, s.replicas.iter().any(there))
                },
            ));
        }
        let gray = self.config.late > 0 || self.config.refused > 0;
        if self.config.eager && gray {
            properties.push(Property::<Self>::eventually(
                HEALTHY_LEADS,
                |m, s: &State| s.healthy_leads_to_the_end(&m.config),
            ));
        }
        if self.config.late > 0 {
            properties.push(Property::<Self>::sometimes(UNKNOWN_WON, |m, s: &State| {
                let late = |term: Term| s.replicas[usize::from(term.owner)].health == Health::Late;
                m.first(8, s.redis.live_term(s.time).is_some_and(late))
            }));
        }
        if self.config.refused > 0 {
            properties.push(Property::<Self>::sometimes(
                REFUSED_ENDED,
                |m, s: &State| {
                    let ended = |r: &Replica| r.health == Health::Refused && r.short_terms > 0;
                    m.first(9, s.replicas.iter().any(ended))
                },
            ));
        }
        if !self.config.eager && self.config.max_delayed > 0 {
            // An acquire's reply delayed past its bound: the observe that resolves it answers
            // with the term that acquire won, which its replica is about to give back.
            properties.push(Property::<Self>::sometimes(
                UNKNOWN_FOUND,
                |m, s: &State| {
                    let unknown = |msg: &Msg| match *msg {
                        Msg::Observed {
                            to,
                            confirmed: true,
                            holder: Some(term),
                            ..
                        } => {
                            let last_led = s.replicas[usize::from(to)].last_led;
                            term.owner == to && last_led.is_none_or(|led| term.token > led)
                        }
                        _ => false,
                    };
                    m.first(10, s.net.iter().any(unknown))
                },
            ));
        }
        if self.config.eager && !gray {
            properties.push(Property::<Self>::eventually(
                "a replica leads once faults stop",
                |m, s: &State| s.time >= m.config.faults_until && !s.passing().is_empty(),
            ));
        }
        properties
    }
}
