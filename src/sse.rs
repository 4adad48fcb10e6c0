//! `GET /leader` as server-sent events: one event with the same JSON as `/leader` at once, then
//! one at every change of role, leader, token or candidacy. Each watcher reads from its own
//! bounded buffer ([`Watchers::subscribe`]); a watcher that falls behind is dropped (its stream
//! ends), so watchers never slow the elector. How many watchers are served at once is bounded
//! by the caller: each stream holds the slot it is given until it ends.
//!
//! Every event has an id, `<owner id>:<n>`, n counting the changes this process published. A
//! client that reconnects with `Last-Event-ID` (as a browser's `EventSource` does by itself)
//! gets at once every change after that one, when it came from this very process and is among
//! the last [`HISTORY`] changes; otherwise the current status, as a new watcher does. Each
//! event is the whole status, so the last event a client got is the state it should act on,
//! and a gap in n tells it that it missed changes.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use futures_util::stream;

use crate::board::{HISTORY, Shown, Watchers};

/// Events a watcher may fall behind by before it is dropped.
pub const WATCHER_BUFFER: usize = 16;

/// How often an idle stream sends a comment, so that proxies keep it open and a watcher that
/// went away is noticed (the write fails and the watcher is dropped).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The name of every event (`event: leader`).
pub const EVENT_NAME: &str = "leader";

/// A watcher's event stream, resumed after `last_event_id` when it names one of this process's
/// events; `render` turns a status into the event's JSON. `slot` (the caller's permit for one
/// stream) is held until the stream ends or its client goes.
pub fn events<R, S>(
    watchers: &Watchers,
    last_event_id: Option<&str>,
    slot: S,
    render: R,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<R, S>>
where
    R: Fn(&Shown) -> String + Send + 'static,
    S: Send + 'static,
{
    let owner = watchers.owner();
    let after = last_event_id.and_then(|id| event_number(id, &owner));
    let rx = watchers.resume(WATCHER_BUFFER.max(HISTORY), after);
    let stream = stream::unfold((rx, render, slot), |(mut rx, render, slot)| async move {
        let numbered = rx.recv().await?;
        let status = &numbered.status;
        let event = Event::default()
            .event(EVENT_NAME)
            .id(format!("{}:{}", status.owner, numbered.number))
            .data(render(status));
        Some((Ok(event), (rx, render, slot)))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

/// The number in an event id `<owner id>:<n>` of `owner`'s; `None` for another's or a
/// malformed one.
fn event_number(id: &str, owner: &str) -> Option<u64> {
    let (of, n) = id.trim().rsplit_once(':')?;
    (of == owner).then_some(())?;
    n.parse().ok()
}

/// Whether a request's `Accept` header asks for an event stream.
pub fn wants_events(accept: Option<&str>) -> bool {
    crate::accept::names(accept, "text/event-stream")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_id_counts_only_for_its_own_process() {
        let owner = "web-a-0b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e";
        let cases = [
            (format!("{owner}:7"), Some(7)),
            (format!(" {owner}:0 "), Some(0)),
            (format!("{owner}:x"), None),
            (format!("{owner}7"), None),
            (
                "web-a-1b7c2b5e-6a4c-4a39-9a55-0d9b1b1f0c3e:7".to_owned(),
                None,
            ),
            ("7".to_owned(), None),
            (String::new(), None),
        ];
        for (id, want) in cases {
            assert_eq!(event_number(&id, owner), want, "{id:?}");
        }
    }

    #[test]
    fn only_an_accept_header_naming_the_event_stream_asks_for_events() {
        let cases = [
            (None, false),
            (Some("application/json"), false),
            (Some("text/event-stream"), true),
            (Some("text/html, text/event-stream;q=0.9"), true),
            (Some("*/*"), false),
            (Some("text/event-streamx"), false),
            (Some("Text/Event-Stream"), true),
            (Some("text/event-stream;q=0"), false),
            (Some("text/event-stream; q=0.0, application/json"), false),
            (Some("text/event-stream;Q=0"), false),
            (Some("text/event-stream; q = 0"), false),
            (Some("text/event-stream;q=NaN"), false),
        ];
        for (accept, want) in cases {
            assert_eq!(wants_events(accept), want, "{accept:?}");
        }
    }
}
