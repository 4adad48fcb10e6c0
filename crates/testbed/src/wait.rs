//! Waiting for conditions with a bound: never a bare sleep as the assertion. The async waits
//! run on tokio's clock; the blocking ones on the thread that calls them.

use std::future::Future;
use std::time::{Duration, Instant};

use tokio::sync::watch;

/// Polls `probe` every 5 ms until it returns `Some`, or panics after `timeout` naming `what`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        if tokio::time::Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits until the watched value satisfies `pred`, or panics after `timeout` naming `what`.
pub async fn until<T: Clone>(
    what: &str,
    rx: &mut watch::Receiver<T>,
    timeout: Duration,
    mut pred: impl FnMut(&T) -> bool,
) -> T {
    match tokio::time::timeout(timeout, rx.wait_for(|v| pred(v))).await {
        Ok(Ok(v)) => v.clone(),
        Ok(Err(_)) => panic!("the watched value closed while waiting for {what}"),
        Err(_) => panic!("timed out after {timeout:?} waiting for {what}"),
    }
}

/// Asserts that `pred` holds for the watched value during the whole of `window`.
pub async fn holds_for<T>(
    what: &str,
    rx: &mut watch::Receiver<T>,
    window: Duration,
    mut pred: impl FnMut(&T) -> bool,
) {
    let result = tokio::time::timeout(window, rx.wait_for(|v| !pred(v))).await;
    if let Ok(Ok(v)) = result {
        drop(v);
        panic!("{what} stopped holding within {window:?}");
    }
}

/// Polls `probe` every 10 ms on this thread until it returns `Some`, or panics after `timeout`
/// naming `what`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = probe() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Asserts on this thread that `pred` holds on every look (every 20 ms) for the whole of
/// `window`, naming `what` when it stops.
pub fn holds_on_every_look(what: &str, window: Duration, mut pred: impl FnMut() -> bool) {
    let end = Instant::now() + window;
    while Instant::now() < end {
        assert!(pred(), "{what} stopped holding within {window:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls every 2 ms until `pred` holds; the instant it first held, or `None` after `timeout`.
pub fn first_instant(timeout: Duration, mut pred: impl FnMut() -> bool) -> Option<Instant> {
    let deadline = Instant::now() + timeout;
    loop {
        if pred() {
            return Some(Instant::now());
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}
