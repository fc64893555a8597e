//! Where the cgroups go (parsed from sample `/proc` files), and a real cgroup emptied of a
//! detached descendant (root on a host with a writable hierarchy; skipped elsewhere, failing
//! under CI).

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};

use super::locate::unescape;
use super::{Cgroups, Hierarchy, locate, parent_name};

/// A hybrid host (v1 controllers, the unified hierarchy at `/sys/fs/cgroup/unified`).
const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

/// A v2-only host.
const UNIFIED: &str = "\
25 22 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
";

#[test]
fn v1_pids_is_chosen_where_mounted_else_v2() {
    let own = "8:pids:/\n6:freezer:/\n0::/\n";
    let (hierarchy, base) = locate(HYBRID, own).expect("a hierarchy");
    assert_eq!(hierarchy, Hierarchy::V1Pids);
    assert_eq!(base, PathBuf::from("/sys/fs/cgroup/pids"));
    let (hierarchy, base) = locate(UNIFIED, "0::/\n").expect("a hierarchy");
    assert_eq!(hierarchy, Hierarchy::V2);
    assert_eq!(base, PathBuf::from("/sys/fs/cgroup"));
    let none = locate(
        "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n",
        "0::/\n",
    );
    assert!(none.is_err_and(|e| e.contains("no cgroup")));
}

#[test]
fn an_own_cgroup_that_is_not_visible_falls_back_to_the_mount() {
    // A container without a cgroup namespace: /proc/self/cgroup names the host's path.
    let (_, base) = locate(UNIFIED, "0::/system.slice/docker-0123.scope\n").expect("hierarchy");
    assert_eq!(base, PathBuf::from("/sys/fs/cgroup"));
}

#[test]
fn mountinfo_escapes_are_undone_and_names_are_stable() {
    assert_eq!(unescape("/a\\040b\\134c"), "/a b\\c");
    assert_eq!(unescape("/plain\\9"), "/plain\\9");
    let data = Path::new("/var/lib/rouse");
    assert_eq!(parent_name(data), parent_name(data));
    assert_ne!(parent_name(data), parent_name(Path::new("/var/lib/other")));
    assert!(parent_name(data).starts_with("rouse-"));
}

/// The host's cgroups for this test, or `None` (printed) where they cannot be used here.
fn host_cgroups(test: &str) -> Option<Cgroups> {
    let data = tempfile::tempdir().expect("tempdir");
    match Cgroups::open(data.path(), None) {
        Ok(cgroups) => Some(cgroups),
        Err(why)
            if std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0" && v != "false") =>
        {
            panic!("{test}: cgroups are required under CI: {why}")
        }
        Err(why) => {
            eprintln!("skipping {test}: {why}");
            None
        }
    }
}

#[tokio::test]
async fn a_kill_empties_the_cgroup_of_a_detached_descendant_with_no_environment() {
    let Some(cgroups) = host_cgroups("a_kill_empties_the_cgroup") else {
        return;
    };
    empties_a_detached_descendant(&cgroups).await;
    // The other hierarchy too, where this host also has it (a hybrid host has both).
    if let Some(other) = other_hierarchy(cgroups.hierarchy()) {
        empties_a_detached_descendant(&other).await;
    }
}

/// A cgroup of the hierarchy other than `used`, at the root of its mount, when this host has
/// it writable (v2 beside v1 `pids` on a hybrid host).
fn other_hierarchy(used: Hierarchy) -> Option<Cgroups> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let (wanted, fstype) = match used {
        Hierarchy::V1Pids => (Hierarchy::V2, "cgroup2"),
        Hierarchy::V2 => (Hierarchy::V1Pids, "cgroup"),
    };
    let point = mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut after = after.split(' ');
        let (kind, options) = (after.next()?, after.nth(1).unwrap_or_default());
        let pids = options.split(',').any(|o| o == "pids");
        (kind == fstype && (wanted == Hierarchy::V2 || pids))
            .then(|| PathBuf::from(before.split(' ').nth(4).unwrap_or_default()))
    })?;
    let parent = point.join(format!("rouse-test-{}", std::process::id()));
    Cgroups::at(wanted, parent, None).ok()
}

/// A leader that starts a descendant in a new session with an empty environment (as a daemon
/// escaping every other mark would) and exits: the kill ends the descendant, the cgroup takes
/// a process again afterwards, and goes.
async fn empties_a_detached_descendant(cgroups: &Cgroups) {
    let cgroup = cgroups.create("default_box.1").expect("a workload cgroup");
    let dir = tempfile::tempdir().expect("tempdir");
    let pid_file = dir.path().join("detached.pid");
    // It waits for a line first, so it is in the cgroup before it starts anything.
    let script = format!(
        "read go; (setsid env -i sh -c 'echo $$ > {}; exec sleep 600' &); exit 0",
        pid_file.display()
    );
    let mut leader = std::process::Command::new("sh")
        .args(["-c", &script])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    cgroup.adopt(leader.id()).expect("join");
    let mut go = leader.stdin.take().expect("piped stdin");
    std::io::Write::write_all(&mut go, b"go\n").expect("write");
    drop(go);
    let status = leader.wait().expect("wait");
    assert!(status.success() || status.signal().is_some());
    let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let detached: u32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        assert!(std::time::Instant::now() < until, "no detached descendant");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(
        cgroup.members(),
        vec![detached],
        "only the descendant is left"
    );
    assert_eq!(cgroup.kill_all().await, Ok(1));
    assert!(cgroup.members().is_empty());
    // The cgroup takes processes again (pids.max is back), and goes.
    let mut again = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn");
    cgroup.adopt(again.id()).expect("join again");
    assert_eq!(cgroup.kill_all().await, Ok(1));
    assert_eq!(again.wait().expect("wait").signal(), Some(9));
    cgroup.remove();
    assert!(!cgroup.dir().exists());
    eprintln!(
        "a detached descendant was killed under {}",
        cgroups.hierarchy().as_str()
    );
    cgroups.remove();
    assert!(!cgroups.parent().exists());
}

#[test]
fn a_start_sweeps_the_cgroups_a_crashed_run_left() {
    let Some(cgroups) = host_cgroups("a_start_sweeps_the_cgroups") else {
        return;
    };
    let left = cgroups.create("default_box.7").expect("a workload cgroup");
    let mut orphan = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .expect("spawn");
    left.adopt(orphan.id()).expect("join");
    // The next run opens the same parent and sweeps it.
    assert_eq!(cgroups.sweep(), 1);
    assert_eq!(orphan.wait().expect("wait").signal(), Some(9));
    assert!(!left.dir().exists());
    cgroups.remove();
}
