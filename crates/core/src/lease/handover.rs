//! Handover on demand, on the Redis side: the request that asks the leader of one term to step
//! down, and the release that hands the next term to a named identity for a short reservation.
//!
//! Neither can make two leaders: the request only makes the leader step down and release through
//! the usual compare-and-DEL, and the reservation only refuses acquires that would otherwise
//! succeed. A request is bound to its term (see `scripts.rs`); its TTL only clears it away.

use std::time::Duration;

use redis::Value;

use super::reply::{int, millis, protocol};
use super::scripts::HANDOVER_SCRIPT;
use super::{FencingToken, Holder, LeaseError, RedisLease, Released, Term};

/// The next term, reserved for one identity for a while.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reservation {
    /// The identity (pod name) that alone may acquire while the reservation lasts.
    pub identity: String,
    /// How long the reservation lasts.
    pub duration: Duration,
}

/// The outcome of a handover request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandoverRequested {
    /// The request is stored for the holder's term, and the holder was nudged.
    Requested,
    /// The lease is not (any more) in the holder's term: nothing was stored.
    TermEnded,
}

impl RedisLease {
    /// Asks `holder` to step down at its next renewal (at once when its release channel hears
    /// the nudge), handing the next term to `to` when given. The request lives for `ttl` and
    /// touches only the holder's term as observed.
    pub async fn request_handover(
        &self,
        holder: &Holder,
        to: Option<&str>,
        ttl: Duration,
        timeout: Duration,
    ) -> Result<HandoverRequested, LeaseError> {
        const OP: &str = "handover";
        let term = holder.term_value();
        let term = term.as_str();
        let reply: Value = self
            .call(OP, timeout, |mut live| async move {
                HANDOVER_SCRIPT
                    .key(&self.keys.lease)
                    .key(&self.keys.handover)
                    .arg(term)
                    .arg(to.unwrap_or("-"))
                    .arg(millis(ttl))
                    .arg(&self.keys.channel)
                    .invoke_async(&mut live.conn)
                    .await
                    .map_err(self.fail(OP))
            })
            .await?;
        match int(&reply) {
            Some(1) => Ok(HandoverRequested::Requested),
            Some(0) => Ok(HandoverRequested::TermEnded),
            _ => Err(protocol(OP, &reply)),
        }
    }

    /// Ends the term with `token` like [`release`](Self::release), and in the same step reserves
    /// the next term as `reserve` says (before followers hear of the release).
    pub async fn release_handing_over(
        &self,
        token: FencingToken,
        reserve: Option<&Reservation>,
        timeout: Duration,
    ) -> Result<Released, LeaseError> {
        self.release_term(Term::Of(token), reserve, timeout).await
    }
}
