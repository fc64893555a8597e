//! [`OnWake`]: a future polled only when its own waker fired.
//!
//! A connection task waits for its HTTP connection and for the proxy's drain signal at once,
//! and an upstream stream watches its sandbox's quiesce signal on every read and write. The
//! task is woken for every socket event, and polling a cancellation token costs a lock each
//! time. Wrapped in `OnWake`, such a signal is polled once, then again only after it woke the
//! task itself.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

/// `inner`, polled only at first and after its waker fired.
pub(crate) struct OnWake<F> {
    inner: Pin<Box<F>>,
    flag: Arc<Flag>,
    /// The waker handed to `inner`: sets the flag, then wakes the task.
    waker: Waker,
}

/// Whether the inner future's waker fired, and the task to wake when it does.
#[derive(Default)]
struct Flag {
    fired: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.fired.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<F: Future> OnWake<F> {
    /// Wraps `inner`; its first poll is the wrapper's first poll.
    pub(crate) fn new(inner: F) -> Self {
        let flag = Arc::new(Flag::default());
        flag.fired.store(true, Ordering::Relaxed);
        Self {
            inner: Box::pin(inner),
            waker: Waker::from(Arc::clone(&flag)),
            flag,
        }
    }
}

impl<F> OnWake<F> {
    /// Whether the inner future's waker fired since it was last polled (or it was never
    /// polled): then it may be ready.
    pub(crate) fn fired(&self) -> bool {
        self.flag.fired.load(Ordering::Acquire)
    }
}

impl<F: Future> Future for OnWake<F> {
    type Output = F::Output;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        // Registered before the flag is read, so a wake between the two is not lost.
        self.flag.task.register(cx.waker());
        if !self.flag.fired.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let this = &mut *self;
        let mut inner_cx = Context::from_waker(&this.waker);
        this.inner.as_mut().poll(&mut inner_cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn completes_when_the_inner_future_is_woken() {
        let token = tokio_util::sync::CancellationToken::new();
        let mut wrapped = Box::pin(OnWake::new(token.clone().cancelled_owned()));
        let first = futures::poll!(wrapped.as_mut());
        assert!(first.is_pending());
        token.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), wrapped)
            .await
            .expect("the cancellation completes the wrapper");
    }

    #[tokio::test]
    async fn is_not_polled_again_without_its_own_wake() {
        let polls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&polls);
        let inner = std::future::poll_fn(move |_| {
            counted.fetch_add(1, Ordering::Relaxed);
            Poll::<()>::Pending
        });
        let mut wrapped = Box::pin(OnWake::new(inner));
        for _ in 0..3 {
            assert!(futures::poll!(wrapped.as_mut()).is_pending());
        }
        assert_eq!(polls.load(Ordering::Relaxed), 1);
    }
}
