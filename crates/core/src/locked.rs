//! The one way the core and the product take a lock: a lock whose holder panicked is taken as
//! it is, because no value either keeps under one holds an invariant a panic could break.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// `mutex`'s guard, poisoned or not.
pub fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
