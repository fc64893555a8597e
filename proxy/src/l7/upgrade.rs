//! Upgraded connections (WebSocket and any other `Upgrade`): after the sandbox answers 101, the
//! two upgraded streams are copied both ways with byte accounting, an optional idle timeout
//! and the proxy's hard stop.

use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;

use crate::kind::ConnKind;
use crate::route::{RouteTarget, Router};
use crate::splice::{SpliceOptions, splice};

/// Spawns the tunnel of an upgraded request: once both sides' upgrades complete, their streams
/// are spliced with byte accounting until both ends close or the proxy's hard stop.
pub(crate) fn spawn_tunnel(
    router: &Router,
    target: RouteTarget,
    downstream: OnUpgrade,
    upstream: OnUpgrade,
) {
    let Some(guard) = router.guard(&target.key, ConnKind::Upgrade) else {
        return;
    };
    let hard_stop = router.hard_stop();
    let span = tracing::debug_span!("upgraded", sandbox.key = %target.key);
    router.tasks().spawn(tracing::Instrument::instrument(async move {
        let (down, up) = match tokio::try_join!(downstream, upstream) {
            Ok(pair) => pair,
            Err(err) => {
                tracing::debug!(sandbox.key = %target.key, error = %err, "upgrade failed");
                return;
            }
        };
        // The client side keeps its connection's idle limit (switched to the upgraded one by
        // the service), so the splice needs none of its own.
        let mut client = TokioIo::new(down);
        let mut sandbox = TokioIo::new(up);
        let options = SpliceOptions::default();
        tokio::select! {
            result = splice(&mut client, &mut sandbox, options, |up, down| guard.record_bytes(up, down)) => {
                if let Err(err) = result {
                    tracing::debug!(sandbox.key = %target.key, error = %err, "upgraded stream ended");
                }
            }
            () = hard_stop.cancelled() => {}
        }
    }, span));
}
