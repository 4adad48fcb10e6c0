//! Accepting a test server's connections until it is told to stop.

use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// The next connection to `listener`, or `None` once `stop` is cancelled. A failed accept (out
/// of descriptors or a similar passing failure) is tried again 10 ms later, so that a server's
/// accept loop does not spin.
pub async fn next_connection(
    listener: &TcpListener,
    stop: &CancellationToken,
) -> Option<TcpStream> {
    loop {
        let accepted = tokio::select! {
            biased;
            _ = stop.cancelled() => return None,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => return Some(stream),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}
