//! The candidate check's verdict, as Kubernetes judges probes: so many failures in a row make a
//! replica unhealthy, so many successes in a row make it healthy again. Pure, table-tested.

use crate::board::Candidacy;

/// Consecutive results so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Tally {
    pub failures: u32,
    pub successes: u32,
}

/// The thresholds (`failureThreshold`, `successThreshold`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Thresholds {
    pub failure: u32,
    pub success: u32,
}

/// The verdict after one more result. A replica that stands (unchecked or healthy) stands
/// until `failure` failures in a row; one that does not (pending or unhealthy) stays out until
/// `success` successes in a row.
pub(crate) fn judge(
    now: &Candidacy,
    tally: Tally,
    result: Result<(), String>,
    thresholds: Thresholds,
) -> (Candidacy, Tally) {
    match result {
        Ok(()) => {
            let tally = Tally {
                failures: 0,
                successes: tally.successes.saturating_add(1),
            };
            let verdict = if tally.successes >= thresholds.success {
                Candidacy::Healthy
            } else {
                now.clone()
            };
            (verdict, tally)
        }
        Err(reason) => {
            let tally = Tally {
                failures: tally.failures.saturating_add(1),
                successes: 0,
            };
            let verdict = if tally.failures >= thresholds.failure {
                Candidacy::Unhealthy { reason }
            } else {
                match now {
                    Candidacy::Pending { .. } => Candidacy::Pending { reason },
                    Candidacy::Unhealthy { .. } => Candidacy::Unhealthy { reason },
                    other => other.clone(),
                }
            };
            (verdict, tally)
        }
    }
}

/// Whether the check has just put this replica out, also from pending (said, and counted).
pub(super) fn newly_unhealthy(before: &Candidacy, now: &Candidacy) -> bool {
    matches!(now, Candidacy::Unhealthy { .. }) && !matches!(before, Candidacy::Unhealthy { .. })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unhealthy(r: &str) -> Candidacy {
        Candidacy::Unhealthy { reason: r.into() }
    }

    fn pending(r: &str) -> Candidacy {
        Candidacy::Pending { reason: r.into() }
    }

    #[test]
    fn judge_table() {
        let t = |failures, successes| Tally {
            failures,
            successes,
        };
        let th = Thresholds {
            failure: 3,
            success: 2,
        };
        let ok = || Ok(());
        let bad = || Err("status 500".to_owned());
        // (now, tally, result, verdict, tally after)
        let cases = [
            // A healthy replica stands through failures below the threshold.
            (
                Candidacy::Healthy,
                t(0, 5),
                bad(),
                Candidacy::Healthy,
                t(1, 0),
            ),
            (
                Candidacy::Healthy,
                t(1, 0),
                bad(),
                Candidacy::Healthy,
                t(2, 0),
            ),
            (
                Candidacy::Healthy,
                t(2, 0),
                bad(),
                unhealthy("status 500"),
                t(3, 0),
            ),
            // A success resets the failures.
            (
                Candidacy::Healthy,
                t(2, 0),
                ok(),
                Candidacy::Healthy,
                t(0, 1),
            ),
            // Unhealthy stays out until `success` successes in a row.
            (unhealthy("x"), t(3, 0), ok(), unhealthy("x"), t(0, 1)),
            (unhealthy("x"), t(0, 1), ok(), Candidacy::Healthy, t(0, 2)),
            (
                unhealthy("x"),
                t(0, 1),
                bad(),
                unhealthy("status 500"),
                t(1, 0),
            ),
            // Pending (not judged yet) is out, like unhealthy, and says the last failure.
            (
                pending("initial delay"),
                t(0, 0),
                bad(),
                pending("status 500"),
                t(1, 0),
            ),
            (
                pending("initial delay"),
                t(0, 1),
                ok(),
                Candidacy::Healthy,
                t(0, 2),
            ),
            // A command's check, judged after its start-up grace, starts out standing.
            (
                Candidacy::Unchecked,
                t(0, 0),
                bad(),
                Candidacy::Unchecked,
                t(1, 0),
            ),
            (
                Candidacy::Unchecked,
                t(0, 0),
                ok(),
                Candidacy::Unchecked,
                t(0, 1),
            ),
            (
                Candidacy::Unchecked,
                t(2, 0),
                bad(),
                unhealthy("status 500"),
                t(3, 0),
            ),
        ];
        for (now, tally, result, want, want_tally) in cases {
            let got = judge(&now, tally, result.clone(), th);
            assert_eq!(got, (want, want_tally), "{now:?} {tally:?} {result:?}");
        }
    }

    #[test]
    fn thresholds_of_one_flip_at_once() {
        let th = Thresholds {
            failure: 1,
            success: 1,
        };
        let (v, t) = judge(
            &Candidacy::Healthy,
            Tally::default(),
            Err("down".into()),
            th,
        );
        assert_eq!(v, unhealthy("down"));
        assert_eq!(judge(&v, t, Ok(()), th).0, Candidacy::Healthy);
    }
}
