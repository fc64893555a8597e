//! Chaos and soak tests of `rouse up`: the hostile-use repros of what once went wrong, each
//! asserting the fixed behaviour (docs/standalone.md, "Guarantees"). Every loop is bounded in
//! count and time, every wait is on a condition with a deadline.

mod support;

use std::time::Duration;

use serde_json::json;
use support::{Options, Rouse, sandbox};

/// A web server on `$PORT` whose `/slow` answers after three seconds.
const SLOW_SERVER: &str = r#"exec python3 -c '
import http.server, os, time
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path != "/slow":
            return super().do_GET()
        time.sleep(3)
        self.send_response(200)
        self.send_header("content-length", "5")
        self.end_headers()
        self.wfile.write(b"slow\n")
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
'"#;

/// Requests `rounds` times with `gap` between the end of one and the start of the next and
/// checks that none was refused and the workload never restarted (was never idle-suspended).
async fn use_with_gaps(rouse: &Rouse, name: &str, gap: Duration, rounds: usize, slow: bool) {
    rouse.wait_condition(name, "Ready", "True", None).await;
    // Before the first request the sandbox may already have been idle long enough: that
    // suspend is right, and the request wakes it. The runs are counted from then on.
    expect_ok(rouse, name, "/").await;
    let runs = rouse.runs(name).len();
    for round in 0..rounds {
        tokio::time::sleep(gap).await;
        let path = if slow && round % 2 == 1 { "/slow" } else { "/" };
        expect_ok(rouse, name, path).await;
    }
    let after = rouse.runs(name).len();
    if after != runs {
        rouse.fail(&format!(
            "{name}: suspended while in use ({runs} runs before, {after} after); log:\n{}",
            rouse.log(name)
        ));
    }
}

async fn expect_ok(rouse: &Rouse, name: &str, path: &str) {
    match rouse.get(name, path).await {
        Ok((200, _)) => {}
        other => rouse.fail(&format!("{name}: GET {path} through the proxy: {other:?}")),
    }
}

/// Item 1: an idle timeout shorter than the activity report interval (10 s) never suspends a
/// sandbox that sees a request just under its timeout apart, nor one with a request open
/// longer than the timeout.
#[tokio::test]
async fn idle_suspend_never_stops_a_sandbox_in_use() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(dir.path(), &Options::default());
    for (name, idle) in [("idle1", 1), ("idle2", 2), ("idle5", 5)] {
        let spec = json!({"suspension": {"idleTimeoutSeconds": idle}});
        rouse.create(&sandbox(name, SLOW_SERVER, spec)).await;
    }
    tokio::join!(
        use_with_gaps(&rouse, "idle1", Duration::from_millis(600), 8, true),
        use_with_gaps(&rouse, "idle2", Duration::from_millis(1400), 6, false),
        use_with_gaps(&rouse, "idle5", Duration::from_millis(4000), 3, false),
    );
    // Idle suspend still works: left alone, the 1 s sandbox is suspended.
    rouse
        .wait_condition("idle1", "Suspended", "True", None)
        .await;
}
