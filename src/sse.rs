//! `GET /leader` as server-sent events: one event with the same JSON as `/leader` at once, then
//! one at every change of role, leader, token or candidacy. Each watcher reads from its own
//! bounded buffer ([`Watchers::subscribe`]); a watcher that falls behind is dropped (its stream
//! ends), so watchers never slow the elector.

use std::convert::Infallible;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use futures_util::stream;

use crate::elector::{Status, Watchers};

/// Events a watcher may fall behind by before it is dropped.
pub const WATCHER_BUFFER: usize = 16;

/// How often an idle stream sends a comment, so that proxies keep it open and a watcher that
/// went away is noticed (the write fails and the watcher is dropped).
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The name of every event (`event: leader`).
pub const EVENT_NAME: &str = "leader";

/// A new watcher's event stream; `render` turns a status into the event's JSON.
pub fn events<R>(
    watchers: &Watchers,
    render: R,
) -> Sse<impl Stream<Item = Result<Event, Infallible>> + use<R>>
where
    R: Fn(&Status) -> String + Send + 'static,
{
    let rx = watchers.subscribe(WATCHER_BUFFER);
    let stream = stream::unfold((rx, render), |(mut rx, render)| async move {
        let status = rx.recv().await?;
        let event = Event::default().event(EVENT_NAME).data(render(&status));
        Some((Ok(event), (rx, render)))
    });
    Sse::new(stream).keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
}

/// Whether a request's `Accept` header asks for an event stream.
pub fn wants_events(accept: Option<&str>) -> bool {
    accept.is_some_and(|a| {
        a.split(',')
            .any(|part| part.split(';').next().map(str::trim) == Some("text/event-stream"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_accept_header_naming_the_event_stream_asks_for_events() {
        let cases = [
            (None, false),
            (Some("application/json"), false),
            (Some("text/event-stream"), true),
            (Some("text/html, text/event-stream;q=0.9"), true),
            (Some("*/*"), false),
            (Some("text/event-streamx"), false),
        ];
        for (accept, want) in cases {
            assert_eq!(wants_events(accept), want, "{accept:?}");
        }
    }
}
