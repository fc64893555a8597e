use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use serde_json::json;

use super::name::check_name;
use super::*;

/// Host files for [`sample`]: a directory with a file, a file to exclude and a symlink.
fn host_tree() -> tempfile::TempDir {
    let host = tempfile::tempdir().expect("tempdir");
    let host_path = host.path();
    std::fs::create_dir_all(host_path.join("tree/sub")).expect("host tree");
    std::fs::write(host_path.join("tree/sub/data.txt"), "data").expect("host file");
    std::fs::write(host_path.join("tree/skip.txt"), "skipped").expect("host file");
    std::os::unix::fs::symlink("sub/data.txt", host_path.join("tree/link")).expect("symlink");
    std::fs::write(host_path.join("single"), "single file").expect("host file");
    host
}

/// A builder touching every kind of item: text, host file, host directory (with a symlink
/// inside), empty directory with an owner, symlink, exclusion, and the whole run config.
fn sample(host: &Path) -> ImageBuilder {
    ImageBuilder::new("registry.local/sample:1")
        .text("/etc/motd", "hello\n", 0o640)
        .file(host.join("single"), "/opt/single")
        .dir(host.join("tree"), "/srv/tree")
        .exclude("/srv/tree/skip.txt")
        .empty_dir("/home/app", 0o700)
        .owner("/home/app", 1000, 1001)
        .symlink("/bin/sh", "busybox")
        .entrypoint(["/bin/sh", "-c"])
        .cmd(["echo hi"])
        .env("LANG", "C.UTF-8")
        .workdir("/srv")
        .user(1000, 1001)
        .expose(8080)
}

#[test]
fn names_are_checked_and_normalized_as_containerd_does() {
    for good in [
        "registry.local/rouse:dev",
        "rouse",
        "localhost:5000/a/b:v1.2_3",
    ] {
        check_name(good).unwrap_or_else(|e| panic!("{good}: {e}"));
    }
    for bad in [
        "",
        "Rouse:dev",
        "a//b",
        "rouse:",
        "rouse@sha256:00",
        "rouse:a/b",
    ] {
        assert!(check_name(bad).is_err(), "{bad:?} accepted");
    }
    let cases = [
        ("registry.local/rouse:dev", "registry.local/rouse:dev"),
        ("rouse:dev", "docker.io/library/rouse:dev"),
        ("team/rouse", "docker.io/team/rouse:latest"),
        ("localhost/rouse:1", "localhost/rouse:1"),
        ("localhost:5000/rouse", "localhost:5000/rouse:latest"),
    ];
    for (name, want) in cases {
        assert_eq!(normalized_name(name), want, "{name}");
    }
}

#[test]
fn image_paths_must_be_clean_and_absolute() {
    assert_eq!(layer::clean("/usr//bin/x/").expect("clean"), "usr/bin/x");
    for bad in ["usr/bin", "/", "/a/../b", "/a/./b"] {
        let err = layer::clean(bad).expect_err(bad);
        assert!(matches!(err, Error::ImagePath { .. }), "{bad}: {err}");
    }
}

#[test]
fn the_archive_holds_the_entries_and_config_given() {
    let host = host_tree();
    let cache = tempfile::tempdir().expect("tempdir");
    let archive = sample(host.path()).build_in(cache.path()).expect("built");
    let contents = inspect(&archive).expect("a valid archive");
    assert_eq!(contents.name, "registry.local/sample:1");

    let layer = &contents.layer;
    let paths: Vec<&str> = layer.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "/bin",
            "/bin/sh",
            "/etc",
            "/etc/motd",
            "/home",
            "/home/app",
            "/opt",
            "/opt/single",
            "/srv",
            "/srv/tree",
            "/srv/tree/link",
            "/srv/tree/sub",
            "/srv/tree/sub/data.txt",
        ]
    );
    let entry = |p: &str| layer.get(p).unwrap_or_else(|| panic!("{p} missing"));
    assert_eq!(
        (entry("/etc/motd").kind, entry("/etc/motd").mode),
        ('0', 0o640)
    );
    assert_eq!(entry("/etc/motd").size, 6);
    assert_eq!((entry("/etc").kind, entry("/etc").mode), ('5', 0o755));
    let home = entry("/home/app");
    assert_eq!(
        (home.kind, home.mode, home.uid, home.gid),
        ('5', 0o700, 1000, 1001)
    );
    assert_eq!(entry("/bin/sh").link.as_deref(), Some("busybox"));
    assert_eq!(
        entry("/srv/tree/link").link.as_deref(),
        Some("sub/data.txt")
    );
    for (path, e) in layer {
        assert_eq!(e.mtime, 0, "{path}");
        if path != "/home/app" {
            assert_eq!((e.uid, e.gid), (0, 0), "{path}");
        }
    }
    assert_eq!(
        read_layer_file(&archive, "/srv/tree/sub/data.txt").expect("read"),
        b"data"
    );
    assert_eq!(
        read_layer_file(&archive, "/opt/single").expect("read"),
        b"single file"
    );

    let config = &contents.config;
    assert_eq!(config["os"], "linux");
    assert_eq!(config["architecture"], archive::architecture());
    assert_eq!(
        config["config"],
        json!({
            "User": "1000:1001",
            "ExposedPorts": {"8080/tcp": {}},
            "Env": [format!("PATH={DEFAULT_PATH}"), "LANG=C.UTF-8"],
            "Entrypoint": ["/bin/sh", "-c"],
            "Cmd": ["echo hi"],
            "WorkingDir": "/srv",
        })
    );
    let diff_id = config["rootfs"]["diff_ids"][0].as_str().expect("a diff_id");
    let layer_name = format!("{}/layer.tar", diff_id.trim_start_matches("sha256:"));
    assert_eq!(contents.manifest[0]["Layers"], json!([layer_name]));
}

#[test]
fn builds_are_deterministic_and_cached_by_their_inputs() {
    let host = host_tree();
    let (one, two) = (
        tempfile::tempdir().expect("dir"),
        tempfile::tempdir().expect("dir"),
    );
    let first = sample(host.path()).build_in(one.path()).expect("built");
    let second = sample(host.path()).build_in(two.path()).expect("built");
    assert_eq!(first.file_name(), second.file_name());
    assert_eq!(
        std::fs::read(&first).expect("read"),
        std::fs::read(&second).expect("read"),
        "two builds of the same inputs differ"
    );

    // Unchanged inputs: the same file, not rewritten.
    let inode = std::fs::metadata(&first).expect("stat").ino();
    let again = sample(host.path()).build_in(one.path()).expect("built");
    assert_eq!(again, first);
    assert_eq!(std::fs::metadata(&again).expect("stat").ino(), inode);

    // A changed host file (size and mtime), text, owner or config: a new archive.
    std::fs::write(host.path().join("tree/sub/data.txt"), "changed data").expect("write");
    let changed = [
        sample(host.path()),
        sample(host.path()).text("/etc/motd", "bye\n", 0o640),
        sample(host.path()).owner("/home/app", 1000, 1000),
        sample(host.path()).env("LANG", "C"),
    ];
    let mut names = vec![first];
    for builder in changed {
        let path = builder.build_in(one.path()).expect("built");
        assert!(!names.contains(&path), "{} reused", path.display());
        names.push(path);
    }
    let data = read_layer_file(&names[1], "/srv/tree/sub/data.txt").expect("read");
    assert_eq!(data, b"changed data");
}

#[test]
fn a_host_program_comes_with_the_libraries_ldd_lists() {
    let cache = tempfile::tempdir().expect("tempdir");
    let program = PathBuf::from("/bin/true");
    let archive = ImageBuilder::new("registry.local/true:1")
        .binary_with_libs(&program, "/usr/bin/true")
        .build_in(cache.path())
        .expect("built");
    let layer = inspect(&archive).expect("valid").layer;
    let libraries = ldd::closure(std::slice::from_ref(&program)).expect("ldd");
    assert!(!libraries.is_empty(), "/bin/true is expected to be dynamic");
    for library in libraries {
        let path = library.display().to_string();
        let entry = layer.get(&path).unwrap_or_else(|| panic!("{path} missing"));
        let size = std::fs::metadata(&library).expect("stat").len();
        assert_eq!((entry.kind, entry.size), ('0', size), "{path}");
    }
    assert_eq!(layer["/usr/bin/true"].mode, 0o755);
}

#[test]
fn bad_input_is_refused_with_what_was_wrong() {
    let cache = tempfile::tempdir().expect("tempdir");
    let build = |b: ImageBuilder| b.build_in(cache.path()).expect_err("refused");

    let err = build(
        ImageBuilder::new("x:1")
            .text("/a", "", 0o644)
            .text("/a/b", "", 0o644),
    );
    assert!(
        matches!(&err, Error::NotADirectory { path, parent } if path == "/a/b" && parent == "/a"),
        "{err}"
    );
    let err = build(ImageBuilder::new("x:1").owner("/nowhere", 1, 1));
    assert!(
        matches!(&err, Error::NoSuchEntry { path } if path == "/nowhere"),
        "{err}"
    );
    let err = build(ImageBuilder::new("x:1").file("/no/such/file", "/f"));
    assert!(
        matches!(&err, Error::HostRead { path, .. } if path == Path::new("/no/such/file")),
        "{err}"
    );
    let err = build(ImageBuilder::new("x:1").text("relative", "", 0o644));
    assert!(matches!(&err, Error::ImagePath { .. }), "{err}");
    let err = build(ImageBuilder::new("Bad Name").text("/a", "", 0o644));
    assert!(matches!(&err, Error::ImageName { .. }), "{err}");
    assert_eq!(
        std::fs::read_dir(cache.path()).expect("ls").count(),
        0,
        "nothing written"
    );
}

#[test]
fn a_damaged_archive_is_refused() {
    let cache = tempfile::tempdir().expect("tempdir");
    let archive = ImageBuilder::new("registry.local/x:1")
        .text("/a", "original", 0o644)
        .build_in(cache.path())
        .expect("built");
    let mut bytes = std::fs::read(&archive).expect("read");
    let at = bytes
        .windows(8)
        .rposition(|w| w == b"original")
        .expect("the file's bytes in the archive");
    bytes[at..at + 8].copy_from_slice(b"tampered");
    let damaged = cache.path().join("damaged.tar");
    std::fs::write(&damaged, bytes).expect("write");
    let err = inspect(&damaged).expect_err("refused");
    assert!(
        err.to_string().contains("is not the config's diff_id"),
        "{err}"
    );
}
