use super::*;
use crate::board::Board;
use crate::board::shown::tests::shown;

/// Changes what `board` shows.
fn modify(board: &Board, change: impl FnOnce(&mut Shown)) {
    board.modify_if(|s| {
        change(s);
        true
    });
}

fn leader(token: u64) -> Role {
    Role::Leader {
        token: FencingToken(token),
        acquired_at: std::time::SystemTime::now(),
        valid_until: crate::clock::BootInstant::now(),
        lead: crate::clock::WallLead::now(),
    }
}

#[test]
fn a_watcher_gets_the_current_status_at_once_and_every_change_after() {
    let tx = Board::new(shown(Role::Starting).status);
    let watchers = tx.watchers().clone();
    let mut rx = watchers.subscribe(4);
    assert_eq!(
        rx.try_recv().map(|e| e.status.status.role),
        Ok(Role::Starting)
    );
    modify(&tx, |s| s.status.role = leader(7));
    assert_eq!(
        rx.try_recv().map(|e| e.status.token()),
        Ok(Some(FencingToken(7)))
    );
    // A renewal moves only the deadline: no event.
    modify(&tx, |s| s.status.role = leader(7));
    assert!(rx.try_recv().is_err());
    modify(&tx, |s| s.candidacy = Candidacy::Healthy);
    assert_eq!(
        rx.try_recv().map(|e| e.status.candidacy),
        Ok(Candidacy::Healthy)
    );
}

#[test]
fn a_watcher_that_comes_between_a_change_and_its_publishing_gets_it_once() {
    let tx = Board::new(shown(Role::Starting).status);
    let watchers = tx.watchers().clone();
    // A writer has changed the status and not yet published it when the watcher comes.
    tx.shown.send_modify(|s| s.status.role = leader(7));
    let mut rx = watchers.subscribe(4);
    tx.watchers.publish();
    let first = rx.try_recv().expect("the current status at once");
    assert_eq!(first.status.token(), Some(FencingToken(7)));
    assert!(rx.try_recv().is_err(), "the same change twice");
    // A change that leaves the key alone, before any change was published: no event.
    let mut late = watchers.subscribe(4);
    assert_eq!(late.try_recv().map(|e| e.number), Ok(first.number));
    modify(&tx, |s| s.status.transitions += 1);
    assert!(late.try_recv().is_err() && rx.try_recv().is_err());
}

#[test]
fn a_watcher_that_falls_behind_is_dropped_and_the_others_keep_theirs() {
    let tx = Board::new(shown(Role::Starting).status);
    let watchers = tx.watchers().clone();
    let mut slow = watchers.subscribe(2);
    let mut quick = watchers.subscribe(2);
    assert_eq!(
        quick.try_recv().map(|e| e.status.status.role),
        Ok(Role::Starting)
    );
    for token in 1..=3 {
        modify(&tx, |s| s.status.role = leader(token));
        assert_eq!(
            quick.try_recv().map(|e| e.status.token()),
            Ok(Some(FencingToken(token)))
        );
    }
    assert_eq!(watchers.count(), 1, "the slow watcher is dropped");
    // It keeps what it had, then learns that it was dropped.
    assert!(slow.try_recv().is_ok());
    assert!(slow.try_recv().is_ok());
    assert_eq!(
        slow.try_recv(),
        Err(mpsc::error::TryRecvError::Disconnected)
    );
}

#[test]
fn closing_ends_every_stream_after_its_events_and_a_late_watcher_gets_one() {
    let tx = Board::new(shown(Role::Starting).status);
    let watchers = tx.watchers().clone();
    let mut early = watchers.subscribe(4);
    modify(&tx, |s| s.status.role = Role::Stopped);
    watchers.close();
    assert!(watchers.is_closed());
    assert_eq!(
        early.try_recv().map(|e| e.status.status.role),
        Ok(Role::Starting)
    );
    assert_eq!(
        early.try_recv().map(|e| e.status.status.role),
        Ok(Role::Stopped)
    );
    assert_eq!(
        early.try_recv(),
        Err(mpsc::error::TryRecvError::Disconnected)
    );
    let mut late = watchers.subscribe(4);
    assert_eq!(
        late.try_recv().map(|e| e.status.status.role),
        Ok(Role::Stopped)
    );
    assert_eq!(
        late.try_recv(),
        Err(mpsc::error::TryRecvError::Disconnected)
    );
}

#[test]
fn a_watcher_that_comes_back_gets_the_changes_it_missed_or_the_current_status() {
    let tx = Board::new(shown(Role::Starting).status);
    let watchers = tx.watchers().clone();
    for token in 1..=20 {
        modify(&tx, |s| s.status.role = leader(token));
    }
    let numbers = |mut rx: mpsc::Receiver<Numbered>| {
        let mut seen = Vec::new();
        while let Ok(e) = rx.try_recv() {
            seen.push((e.number, e.status.token().map(|t| t.0)));
        }
        seen
    };
    // Change n is the status with token n.
    assert_eq!(
        numbers(watchers.resume(16, Some(17))),
        [(18, Some(18)), (19, Some(19)), (20, Some(20))]
    );
    assert_eq!(
        numbers(watchers.resume(16, Some(20))),
        [(20, Some(20))],
        "up to date: the current status once more"
    );
    // Kept: the last 16, 5 to 20; after 4 every one of them is there.
    assert_eq!(numbers(watchers.resume(16, Some(4))).len(), 16);
    for gone in [Some(3), Some(0), Some(21), None] {
        assert_eq!(
            numbers(watchers.resume(16, gone)),
            [(20, Some(20))],
            "{gone:?}: only the current status"
        );
    }
    // Missed more than the buffer holds: the current status.
    assert_eq!(numbers(watchers.resume(2, Some(10))), [(20, Some(20))]);
    // A resumed watcher gets the changes after, numbered on.
    let mut rx = watchers.resume(16, Some(19));
    modify(&tx, |s| s.status.role = leader(21));
    assert_eq!(rx.try_recv().map(|e| e.number), Ok(20));
    assert_eq!(
        rx.try_recv().map(|e| (e.number, e.status.token())),
        Ok((21, Some(FencingToken(21))))
    );
}

#[test]
fn watchers_that_went_away_are_forgotten_when_the_next_comes_without_a_change() {
    let tx = Board::new(shown(Role::Starting).status);
    let watchers = tx.watchers().clone();
    // A client that reconnects in a loop while nothing changes (days, in a stable cluster).
    for _ in 0..100 {
        drop(watchers.subscribe(2));
    }
    let _kept = watchers.subscribe(2);
    assert_eq!(watchers.count(), 1, "only the watcher still there is kept");
}
