//! The properties the checker verifies on every state: safety (always), the runs a
//! configuration's faults promise (sometimes), and liveness where scheduling is fair
//! (eventually).

use stateright::Property;

use crate::replica::{Replica, Role};
use crate::sentinels::PROMOTED;
use crate::system::{State, System};

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
        if self.config.eager {
            properties.push(Property::<Self>::eventually(
                "a replica leads once faults stop",
                |m, s: &State| s.time >= m.config.faults_until && !s.passing().is_empty(),
            ));
        }
        properties
    }
}
