//! [`Deadline`]: a connection's moving deadline on one timer that is moved only when it fires,
//! so traffic or a keep-alive request that pushes the deadline forward costs no timer update.
//! The idle limit of client streams (`limits::IdleTimeout`) and the HTTP/1.1 relay's limits
//! use it.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// A deadline that only moves later, except through [`Deadline::set`].
#[derive(Debug)]
pub(crate) struct Deadline {
    due: Instant,
    sleep: Pin<Box<Sleep>>,
}

impl Deadline {
    /// A deadline `limit` from now; `None`: never.
    pub(crate) fn after(limit: Option<Duration>) -> Self {
        let due = Instant::now() + limit.unwrap_or(FOREVER);
        Self {
            due,
            sleep: Box::pin(tokio::time::sleep_until(due)),
        }
    }

    /// Sets the deadline. The timer is moved only when the deadline comes earlier than it;
    /// a later one is seen when the timer fires.
    pub(crate) fn set(&mut self, due: Instant) {
        self.due = due;
        if self.sleep.deadline() > due {
            self.sleep.as_mut().reset(due);
        }
    }

    /// Whether the deadline passed; otherwise the timer is armed to wake the task.
    pub(crate) fn poll_passed(&mut self, cx: &mut Context<'_>) -> bool {
        // A reset moves the timer to `due`, which is still ahead, so the next poll is
        // pending: two rounds in practice; the bound only guards against a timer that fires
        // early, by waking the task to try again.
        for _ in 0..4 {
            if self.sleep.as_mut().poll(cx).is_pending() {
                return false;
            }
            if Instant::now() >= self.due {
                return true;
            }
            let due = self.due;
            self.sleep.as_mut().reset(due);
        }
        cx.waker().wake_by_ref();
        false
    }

    /// Runs `work` until it finishes (`Some`) or the deadline passes (`None`).
    pub(crate) async fn run<F: Future>(&mut self, work: F) -> Option<F::Output> {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(out) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(out));
            }
            if self.poll_passed(cx) {
                Poll::Ready(None)
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

/// Far enough ahead to never pass (about 30 years), for a connection without a limit.
const FOREVER: Duration = Duration::from_secs(86_400 * 365 * 30);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_deadline_pushed_forward_ends_work_only_once_it_passes() {
        let mut deadline = Deadline::after(Some(Duration::from_secs(1)));
        let start = Instant::now();
        deadline.set(start + Duration::from_secs(3));
        let ended = deadline.run(std::future::pending::<()>()).await;
        assert_eq!(ended, None);
        assert!(Instant::now() >= start + Duration::from_secs(3));
        deadline.set(Instant::now() + Duration::from_secs(1));
        assert_eq!(deadline.run(async { 7 }).await, Some(7));
        let never = Deadline::after(None);
        assert!(never.due > Instant::now() + Duration::from_secs(86_400 * 365));
    }
}
