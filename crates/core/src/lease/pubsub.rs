//! The release channel: a dedicated pub/sub connection to the lease's channel and the owner's
//! own probe channel.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use redis::Value;
use redis::aio::{PubSubSink, PubSubStream};

use super::{LeaseError, RedisLease};

/// One release announcement, as read from the channel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// The released term, as the release script published it.
    pub term: String,
    /// How many connections were subscribed to the channel when the release was published, when
    /// the announcement says (`<term> <count>`); followers spread their tries over a time that
    /// grows with it.
    pub subscribers: Option<u32>,
}

/// How a handover request's nudge starts on the release channel: `handover <term value>`. A
/// term value holds no whitespace, so no release announcement reads like one.
pub const HANDOVER_NUDGE: &str = "handover ";

/// How the notice of a data loss starts on the release channel: `data-loss <cooldown ms>`,
/// published by the acquire that found the loss and started the cooldown.
pub const DATA_LOSS_NOTICE: &str = "data-loss ";

impl Release {
    /// The term a handover nudge names, when this message is one and not a release.
    pub fn nudged_term(&self) -> Option<&str> {
        self.term.strip_prefix(HANDOVER_NUDGE)
    }

    /// Whether this message is the notice of a data loss, not a release.
    pub fn tells_data_loss(&self) -> bool {
        self.term.starts_with(DATA_LOSS_NOTICE)
    }

    /// Reads an announcement: the term, optionally followed by a space and the subscriber
    /// count. A term holds no whitespace (owner ids refuse it), so the split is unambiguous.
    /// A data-loss notice is kept whole.
    pub fn parse(payload: &str) -> Self {
        if !payload.starts_with(DATA_LOSS_NOTICE)
            && let Some((term, count)) = payload.rsplit_once(' ')
            && !term.is_empty()
            && let Ok(count) = count.parse::<u32>()
        {
            return Self {
                term: term.to_owned(),
                subscribers: Some(count),
            };
        }
        Self {
            term: payload.to_owned(),
            subscribers: None,
        }
    }
}

/// What a subscription heard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Heard {
    /// A message on the release channel.
    Release(Release),
    /// A probe on this owner's own probe channel: the number its try published.
    Probe(u64),
}

/// A live subscription to the release channel and, where Redis lets it, to the owner's own
/// probe channel. As a [`Stream`] it yields everything heard and ends when the connection
/// closes. With the probe channel, each try that carries a probe
/// ([`RedisLease::acquire_observing`]) proves the link; without it, [`ping`](Self::ping) does.
pub struct ReleaseSubscription {
    sink: PubSubSink,
    messages: PubSubStream,
    lease_key: String,
    probe_channel: Option<String>,
}

impl ReleaseSubscription {
    /// Whether the owner's probe channel is subscribed too (an ACL may refuse it), so that its
    /// tries can carry probes.
    pub fn probes(&self) -> bool {
        self.probe_channel.is_some()
    }

    /// One `PING` on the subscription, answered within `timeout`. The returned future owns
    /// what it needs, so that the stream can be read while it runs. A refusal (`NoPermission`,
    /// an ACL without `+ping`) is still an answer from the server: the link works.
    pub fn ping(
        &self,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), LeaseError>> + Send + 'static + use<> {
        const OP: &str = "ping";
        let mut sink = self.sink.clone();
        let lease_key = self.lease_key.clone();
        async move {
            // An error reply comes back as a value; `extract_error` makes it an error.
            let pong = async { sink.ping::<Value>().await.and_then(Value::extract_error) };
            match tokio::time::timeout(timeout, pong).await {
                Ok(Ok(_)) => Ok(()),
                Ok(Err(e)) => Err(LeaseError::from_redis(OP, &lease_key, &e)),
                Err(_) => Err(LeaseError::Timeout {
                    op: OP,
                    after: timeout,
                }),
            }
        }
    }
}

impl Stream for ReleaseSubscription {
    type Item = Heard;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Heard>> {
        loop {
            let Some(msg) = std::task::ready!(self.messages.poll_next_unpin(cx)) else {
                return Poll::Ready(None);
            };
            let payload = String::from_utf8_lossy(msg.get_payload_bytes());
            if self.probe_channel.as_deref() != Some(msg.get_channel_name()) {
                return Poll::Ready(Some(Heard::Release(Release::parse(&payload))));
            }
            // A probe that does not read as a number is not ours to count: skip it.
            if let Ok(n) = payload.parse::<u64>() {
                return Poll::Ready(Some(Heard::Probe(n)));
            }
        }
    }
}

impl RedisLease {
    /// Opens a dedicated pub/sub connection subscribed to the lease's release channel and to
    /// this owner's probe channel, within `timeout`. A refused probe channel (an ACL rule that
    /// names the release channel alone) leaves the subscription without probes. Each call may
    /// reach another node (a Cluster's seeds are taken in turn).
    pub async fn subscribe_releases(
        &self,
        timeout: Duration,
    ) -> Result<ReleaseSubscription, LeaseError> {
        const OP: &str = "subscribe";
        let attempt = self.subscriptions.fetch_add(1, Ordering::Relaxed);
        let subscribe = async {
            let client = async {
                let client = self.conn.pubsub_client(OP, attempt).await?;
                client.get_async_pubsub().await.map_err(self.fail(OP))
            };
            let mut pubsub = client.await.inspect_err(|e| self.conn.after_refusal(e))?;
            pubsub
                .subscribe(&self.keys.channel)
                .await
                .map_err(self.fail(OP))?;
            let probe_channel = self.keys.probe_channel(&self.owner);
            let probe_channel = match pubsub
                .subscribe(&probe_channel)
                .await
                .map_err(self.fail(OP))
            {
                Ok(()) => Some(probe_channel),
                Err(LeaseError::NoPermission { .. }) => None,
                Err(err) => return Err(err),
            };
            Ok::<_, LeaseError>((pubsub, probe_channel))
        };
        let (pubsub, probe_channel) =
            tokio::time::timeout(timeout, subscribe)
                .await
                .map_err(|_| LeaseError::Timeout {
                    op: OP,
                    after: timeout,
                })??;
        let (sink, messages) = pubsub.split();
        Ok(ReleaseSubscription {
            sink,
            messages,
            lease_key: self.keys.lease.clone(),
            probe_channel,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_read_as_terms_with_an_optional_subscriber_count() {
        let release = |term: &str, subscribers| Release {
            term: term.to_owned(),
            subscribers,
        };
        // payload -> release
        let cases = [
            ("pod-a-1b4e", release("pod-a-1b4e", None)),
            ("pod-a-1b4e#17", release("pod-a-1b4e#17", None)),
            ("pod-a-1b4e#17 250", release("pod-a-1b4e#17", Some(250))),
            ("pod-a-1b4e 0", release("pod-a-1b4e", Some(0))),
            // A reserved term taken (acquire.lua): no term a follower saw, so it looks at once.
            (
                "taken pod-b-2c5f#18 3",
                release("taken pod-b-2c5f#18", Some(3)),
            ),
            // Not a count: the whole payload is the term.
            ("pod-a-1b4e x", release("pod-a-1b4e x", None)),
            ("pod-a-1b4e -3", release("pod-a-1b4e -3", None)),
            (" 12", release(" 12", None)),
            ("", release("", None)),
        ];
        for (payload, want) in cases {
            assert_eq!(Release::parse(payload), want, "{payload:?}");
        }
        // payload -> the term a handover nudge names
        let nudges = [
            ("handover pod-a-1b4e#17", Some("pod-a-1b4e#17")),
            ("pod-a-1b4e#17 3", None),
            ("handover", None),
            ("taken pod-b-2c5f#18 3", None),
        ];
        for (payload, want) in nudges {
            assert_eq!(Release::parse(payload).nudged_term(), want, "{payload:?}");
        }
        // payload -> a data-loss notice (kept whole: its number is no subscriber count)
        let losses = [
            ("data-loss 15000", true),
            ("data-loss", false),
            ("pod-a-1b4e#17 3", false),
            ("handover pod-a-1b4e#17", false),
            ("taken pod-b-2c5f#18 3", false),
        ];
        for (payload, want) in losses {
            let release = Release::parse(payload);
            assert_eq!(release.tells_data_loss(), want, "{payload:?}");
            if want {
                assert_eq!(
                    release,
                    Release {
                        term: payload.to_owned(),
                        subscribers: None
                    }
                );
            }
        }
    }
}
