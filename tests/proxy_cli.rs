//! `rouse proxy` end to end: `--check-config`, the missing cluster config error, and a real run that
//! proxies a request and drains on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use nix::sys::resource::{Resource, getrlimit};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

fn rouse() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rouse"))
}

fn write_config(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::NamedTempFile::new().expect("temp file");
    file.write_all(text.as_bytes()).expect("write config");
    file
}

#[test]
fn check_config_accepts_a_valid_file_and_lists_every_problem_of_a_bad_one() {
    let good = write_config("[http]\nlisten = \"127.0.0.1:0\"\n[directory]\nkind = \"static\"\n");
    let out = rouse()
        .args(["proxy", "--check-config"])
        .arg(good.path())
        .output()
        .expect("run rouse");
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok"));

    let bad =
        write_config("[wake]\ndeadline = \"soon\"\n[limits]\nmax_header_bytes = 10\n[bogus]\n");
    let out = rouse()
        .args(["proxy", "--check-config"])
        .arg(bad.path())
        .output()
        .expect("run rouse");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2: wake.deadline"), "{err}");
    assert!(err.contains("line 5: bogus"), "{err}");
}

#[test]
fn the_store_directory_without_a_cluster_config_is_a_clear_error() {
    let config = write_config("[http]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"off\"\n");
    let home = tempfile::tempdir().expect("temp home");
    let out = rouse()
        .args(["proxy", "--config"])
        .arg(config.path())
        .env("HOME", home.path())
        .env("KUBECONFIG", home.path().join("missing-kubeconfig"))
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("run rouse");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no Kubernetes cluster config found"), "{err}");
}

/// A backend answering one request with a fixed body.
fn one_shot_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind backend");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        if let Ok((mut stream, _)) = listener.accept() {
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\nbackend",
            );
        }
    });
    addr
}

#[test]
fn runs_proxies_and_drains_on_sigterm() {
    let backend = one_shot_backend();
    let config = write_config(&format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"off\"\n[directory]\nkind = \"static\"\n\
         [[directory.routes]]\nsandbox = \"default/web\"\naddress = \"127.0.0.1\"\nports = [{}]\n",
        backend.port()
    ));
    // Started with a low soft open-file limit, which the proxy raises to the hard one.
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -Sn 512 && exec \"$0\" \"$@\""])
        .arg(env!("CARGO_BIN_EXE_rouse"))
        .args(["proxy", "--config"])
        .arg(config.path())
        .env("ROUSE_LOG", "info")
        .env("NO_COLOR", "1")
        .stderr(Stdio::piped())
        .spawn()
        .expect("start rouse proxy");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    let mut open_files = None;
    let addr: SocketAddr = loop {
        let line = lines
            .next()
            .expect("the proxy logs its listener before exiting")
            .expect("read log line");
        if line.contains("open-file limit open_files.limit=") {
            open_files = Some(line.clone());
        }
        if let Some(rest) = line.split("listener.addr=").nth(1) {
            let text = rest.split_whitespace().next().unwrap_or_default();
            break text.parse().expect("a socket address in the log");
        }
    };
    std::thread::spawn(move || lines.for_each(drop));
    let open_files = open_files.expect("the open-file limit is logged before the listeners");
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    let nr_open = rouse_proxy::open_files::nr_open().expect("/proc/sys/fs/nr_open");
    let raised = hard.min(nr_open).max(512);
    assert!(
        open_files.contains(&format!(
            "open_files.limit={raised} open_files.started_with=512"
        )),
        "{open_files}"
    );

    let mut stream = TcpStream::connect(addr).expect("connect to proxy");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: web.sandbox.localhost\r\nConnection: close\r\n\r\n")
        .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.ends_with("backend"), "{response}");

    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).expect("SIGTERM");
    let status = child.wait().expect("wait for rouse");
    assert!(status.success(), "{status:?}");
}
