//! The one way the core and the product take a lock: a lock whose holder panicked is taken as
//! it is, because no value either keeps under a lock holds an invariant that a panic could
//! break halfway.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// `mutex`'s guard, poisoned or not.
pub fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
