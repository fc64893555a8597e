//! [`list_watch`]: the one list-watch-relist loop over a [`Store`], with the one [`Backoff`]
//! type, shared by the proxy's directory and the standalone controller's feed.
//!
//! A list, then a watch from the list's version; `Expired` leads to a new list at once, any
//! other failure (and a watch that ends before delivering anything) to a new list after a
//! doubling backoff, reset by the next event. The loop lives in the returned stream: dropping
//! the stream stops it, so it needs no shutdown signal of its own.

use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;

use super::{ListParams, Store, StoreError, StoreObject, WatchEvent, WatchStream};

/// A doubling delay between `min` and `max`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    min: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// A backoff starting at `min` and doubling up to `max`.
    pub fn new(min: Duration, max: Duration) -> Self {
        Self {
            min,
            max: max.max(min),
            next: min,
        }
    }

    /// The delay to wait now; the next one is twice as long, at most `max`.
    pub fn next_delay(&mut self) -> Duration {
        let delay = self.next;
        self.next = (self.next * 2).min(self.max);
        delay
    }

    /// Starts again from `min` (after a success).
    pub fn reset(&mut self) {
        self.next = self.min;
    }
}

/// What a [`list_watch`] stream yields.
#[derive(Debug)]
pub enum Seen<K> {
    /// A full list: every object that exists now (at the start and after every relist).
    Listed(Vec<K>),
    /// An object appeared or changed.
    Applied(K),
    /// An object went away (its last state).
    Deleted(K),
    /// A list or watch failed; the stream lists again (at once for `Expired`, else after the
    /// backoff). Yielded so the caller can log and count it.
    Failed(StoreError),
}

/// Where the loop is.
enum Phase<K> {
    /// List next, after this delay.
    List(Option<Duration>),
    /// Start a watch from this version.
    Watch(String),
    /// Read the watch; `bool` = it delivered an event.
    Watching(WatchStream<K>, bool),
}

/// Lists and watches `store` for the objects `params` selects, forever (until dropped).
///
/// # Example
/// ```no_run
/// # async fn demo(store: impl rouse_shared::store::Store<rouse_shared::api::Sandbox> + 'static) {
/// use std::time::Duration;
/// use futures::StreamExt;
/// use rouse_shared::store::{Backoff, ListParams, Seen, list_watch};
///
/// let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
/// let mut seen = list_watch(store, ListParams::default(), backoff);
/// while let Some(item) = seen.next().await {
///     if let Seen::Failed(err) = item {
///         eprintln!("{err}");
///     }
/// }
/// # }
/// ```
pub fn list_watch<K, S>(
    store: S,
    params: ListParams,
    backoff: Backoff,
) -> BoxStream<'static, Seen<K>>
where
    K: StoreObject,
    S: Store<K> + 'static,
{
    let state = (store, params, backoff, Phase::List(None));
    futures::stream::unfold(
        state,
        |(store, params, mut backoff, mut phase)| async move {
            // Each turn either yields or moves to the next phase; a phase that waits (a backoff
            // or the store) is bounded by the store's own deadlines and the backoff's maximum.
            loop {
                match phase {
                    Phase::List(delay) => {
                        if let Some(delay) = delay {
                            tokio::time::sleep(delay).await;
                        }
                        match store.list(&params).await {
                            Ok(list) => {
                                let next = Phase::Watch(list.resource_version);
                                return Some((
                                    Seen::Listed(list.items),
                                    (store, params, backoff, next),
                                ));
                            }
                            Err(err) => {
                                let next = Phase::List(retry(&err, &mut backoff));
                                return Some((Seen::Failed(err), (store, params, backoff, next)));
                            }
                        }
                    }
                    Phase::Watch(version) => match store.watch(&params, &version).await {
                        Ok(watch) => phase = Phase::Watching(watch, false),
                        Err(err) => {
                            let next = Phase::List(retry(&err, &mut backoff));
                            return Some((Seen::Failed(err), (store, params, backoff, next)));
                        }
                    },
                    Phase::Watching(mut watch, delivered) => {
                        let seen = match watch.next().await {
                            None => {
                                // A watch that ends at once, again and again, must not spin.
                                phase = Phase::List((!delivered).then(|| backoff.next_delay()));
                                continue;
                            }
                            Some(Err(err)) => {
                                let next = Phase::List(retry(&err, &mut backoff));
                                return Some((Seen::Failed(err), (store, params, backoff, next)));
                            }
                            Some(Ok(WatchEvent::Bookmark { .. })) => {
                                phase = Phase::Watching(watch, delivered);
                                continue;
                            }
                            Some(Ok(WatchEvent::Added(obj) | WatchEvent::Modified(obj))) => {
                                Seen::Applied(obj)
                            }
                            Some(Ok(WatchEvent::Deleted(obj))) => Seen::Deleted(obj),
                        };
                        backoff.reset();
                        let next = Phase::Watching(watch, true);
                        return Some((seen, (store, params, backoff, next)));
                    }
                }
            }
        },
    )
    .boxed()
}

/// The wait before listing again after `err`: none for `Expired` (the version is gone, list
/// now), else the backoff's next delay.
fn retry(err: &StoreError, backoff: &mut Backoff) -> Option<Duration> {
    match err {
        StoreError::Expired { .. } => None,
        _ => Some(backoff.next_delay()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_its_maximum_and_resets() {
        let ms = Duration::from_millis;
        let mut backoff = Backoff::new(ms(100), ms(500));
        let delays: Vec<_> = (0..5).map(|_| backoff.next_delay()).collect();
        assert_eq!(delays, [ms(100), ms(200), ms(400), ms(500), ms(500)]);
        backoff.reset();
        assert_eq!(backoff.next_delay(), ms(100));
    }
}
