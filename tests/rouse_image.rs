//! The Rouse image built from this build's `rouse` binary (`rouse_testsupport::image`) against
//! the repository's `Containerfile`: the same base family, binary path and mode, user and
//! entrypoint; and, with root and containerd, imported and run (`rouse --version` as user
//! 65532 in a container). The containerd part skips without them, except under CI.

use std::path::Path;
use std::time::Duration;

use rouse_testsupport::image::{self, NONROOT, ROUSE, containerd_or_skip, inspect};
use serde_json::{Value, json};

/// The value of the first `INSTRUCTION value` line of the Containerfile's last stage.
fn instruction<'a>(containerfile: &'a str, name: &str) -> &'a str {
    let last_stage = containerfile
        .rfind("\nFROM ")
        .map_or(containerfile, |i| &containerfile[i..]);
    last_stage
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no {name} in the Containerfile's last stage"))
        .trim()
}

#[test]
fn rouse_image_matches_the_containerfile_and_runs() {
    let binary = Path::new(env!("CARGO_BIN_EXE_rouse"));
    let built = image::rouse_image(binary).expect("the rouse image");
    assert_eq!(built.name, ROUSE);
    let contents = inspect(&built.archive).expect("a valid archive");
    let config = &contents.config["config"];

    let containerfile =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Containerfile"))
            .expect("the Containerfile");
    // The recipe stands in for this base: glibc and libgcc, the nonroot user. Another base
    // means the recipe and docs/testing.md need a look.
    assert_eq!(
        instruction(&containerfile, "FROM"),
        "gcr.io/distroless/cc-debian12:nonroot"
    );
    assert_eq!(
        config["User"].as_str(),
        Some(instruction(&containerfile, "USER"))
    );
    let entrypoint: Value =
        serde_json::from_str(instruction(&containerfile, "ENTRYPOINT")).expect("JSON form");
    assert_eq!(config["Entrypoint"], entrypoint);
    let copy = instruction(&containerfile, "COPY");
    let destination = copy.split_whitespace().last().expect("a destination");
    let installed = contents
        .layer
        .get(destination)
        .unwrap_or_else(|| panic!("{destination} missing"));
    // `install -m 0755` in the build stage.
    assert_eq!((installed.kind, installed.mode), ('0', 0o755));
    assert_eq!(
        installed.size,
        std::fs::metadata(binary).expect("the binary").len()
    );
    assert_eq!(config["User"], json!(format!("{NONROOT}:{NONROOT}")));

    let Some(containerd) = containerd_or_skip("rouse_image_matches_the_containerfile_and_runs")
    else {
        return;
    };
    containerd.import(&built.archive).expect("imported");
    let runc = std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .any(|dir| dir.join("runc").is_file());
    if !runc {
        assert!(
            !rouse_testsupport::cluster::required(),
            "runc is required under CI"
        );
        eprintln!("skipping the run of the rouse image: runc not on PATH");
        return;
    }
    let output = containerd
        .run(
            ROUSE,
            &format!("rouse-image-{}", std::process::id()),
            &["/usr/local/bin/rouse", "--version"],
            Duration::from_secs(120),
        )
        .expect("ran");
    assert!(
        output.status.success(),
        "{}: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        format!("rouse {}", env!("CARGO_PKG_VERSION"))
    );
}
