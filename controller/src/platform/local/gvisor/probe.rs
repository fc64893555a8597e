//! What a `runsc` binary is and whether Rouse can use it: its version (`runsc --version`) and
//! the capabilities Rouse relies on, read from `runsc flags` and `runsc help restore`.
//!
//! Why a probe and not a version comparison: gVisor's release names are dates
//! (`release-20250101.0`), Debian's package stamps its own (`0.0~20221219.0`) and a build from
//! the Go module stamps the module's pseudo-version or nothing at all; the capabilities are
//! what matters. Debian's runsc of 2022 has no systrap platform and cannot checkpoint a
//! sandbox whose network stack holds a closed connection (`encoding error at object
//! tcp.endpoint`), which silently lost memory on suspends right after traffic.
//!
//! A probe runs two short commands, so its answer is kept per binary (path, size and
//! modification time): replacing the binary probes it again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

/// How to get a runsc Rouse can use, for errors.
pub const RUNSC_HINT: &str = "install gVisor's release (https://gvisor.dev/docs/user_guide/install/) \
     or build the version Rouse is tested with: testsupport/gvisor/build.sh, then set \
     [runtime] runsc to the path it prints plus /runsc";

/// What a runsc binary offers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunscInfo {
    /// The version it reports (`runsc version X`), or `unknown`.
    pub version: String,
    /// It has the systrap platform (gVisor from mid-2023 on): the default, and the mark of a
    /// runsc that checkpoints sandbox networking with closed connections.
    pub systrap: bool,
    /// `runsc restore --background`: memory loads on after the restore returns.
    pub restore_background: bool,
    /// `runsc restore --direct`: the image is read with O_DIRECT.
    pub restore_direct: bool,
    /// `--gofer-network-namespace`: where gofers run (its default pins a namespace with a
    /// bind mount under runsc's root directory, which outlives the sandboxes).
    pub gofer_network_namespace: bool,
}

impl RunscInfo {
    /// Reads the output of `runsc --version`, `runsc flags` and `runsc help restore`.
    pub fn parse(version: &str, flags: &str, restore_help: &str) -> Self {
        let version = version
            .lines()
            .find_map(|l| l.trim().strip_prefix("runsc version "))
            .map(str::trim)
            .filter(|v| !v.is_empty())
            .unwrap_or("unknown")
            .to_owned();
        let platform_help = flag_help(flags, "platform");
        Self {
            version,
            systrap: platform_help.contains("systrap"),
            restore_background: !flag_help(restore_help, "background").is_empty(),
            restore_direct: !flag_help(restore_help, "direct").is_empty(),
            gofer_network_namespace: !flag_help(flags, "gofer-network-namespace").is_empty(),
        }
    }

    /// `Ok` when Rouse can run sandboxes with this runsc; else what is missing.
    pub fn check(&self) -> Result<(), String> {
        if self.systrap {
            Ok(())
        } else {
            Err(format!(
                "runsc version {} is too old: Rouse needs a gVisor with the systrap platform \
                 (2023 or newer), which checkpoints sandboxes that just served traffic",
                self.version
            ))
        }
    }
}

/// The help text of `-name` in the output of a `runsc flags`/`runsc help CMD` listing: the
/// flag's line and its indented description; empty when there is no such flag.
fn flag_help(listing: &str, name: &str) -> String {
    let mut lines = listing.lines();
    let wanted = format!("-{name}");
    let mut out = String::new();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        let flag = trimmed.split_whitespace().next().unwrap_or("");
        if flag == wanted {
            out.push_str(trimmed);
            for more in lines.by_ref() {
                // Go's flag listing indents descriptions with a tab; the next flag has two
                // spaces and a dash.
                if more.trim_start().starts_with('-') {
                    break;
                }
                out.push('\n');
                out.push_str(more.trim());
            }
            break;
        }
    }
    out
}

/// Probes answered so far, by binary.
static PROBED: Mutex<Option<HashMap<Identity, Result<RunscInfo, String>>>> = Mutex::new(None);

/// A binary as it is now: replaced or rebuilt, it is probed again.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Identity {
    path: PathBuf,
    len: u64,
    modified: Option<SystemTime>,
}

/// What `program` (an executable path) offers; probed once per binary. `Err` when it cannot
/// be run or does not answer like runsc.
pub fn probe(program: &Path) -> Result<RunscInfo, String> {
    let meta = std::fs::metadata(program).map_err(|e| format!("{}: {e}", program.display()))?;
    let identity = Identity {
        path: program.to_path_buf(),
        len: meta.len(),
        modified: meta.modified().ok(),
    };
    let cached = PROBED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_ref()
        .and_then(|m| m.get(&identity).cloned());
    if let Some(answer) = cached {
        return answer;
    }
    let answer = run_probe(program);
    PROBED
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get_or_insert_with(HashMap::new)
        .insert(identity, answer.clone());
    answer
}

fn run_probe(program: &Path) -> Result<RunscInfo, String> {
    let output = |args: &[&str]| -> Result<String, String> {
        let out = Command::new(program)
            .args(args)
            .output()
            .map_err(|e| format!("running {} {}: {e}", program.display(), args.join(" ")))?;
        // `runsc flags` and `runsc help` print to stderr in some versions.
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.push_str(&String::from_utf8_lossy(&out.stderr));
        Ok(text)
    };
    let version = output(&["--version"])?;
    if !version.contains("runsc version") {
        return Err(format!(
            "{} --version did not answer like runsc: {:?}",
            program.display(),
            version.lines().next().unwrap_or("")
        ));
    }
    let flags = output(&["flags"])?;
    let restore = output(&["help", "restore"])?;
    Ok(RunscInfo::parse(&version, &flags, &restore))
}

#[cfg(test)]
mod tests {
    use super::RunscInfo;

    const NEW_FLAGS: &str = "  -gofer-network-namespace value\n    \tnetwork namespace for gofers: null (default; ...)\n  -overlay2 value\n    \twrap mounts with overlayfs.\n  -platform string\n    \tspecifies which platform to use: systrap (default), ptrace, kvm. (default \"systrap\")\n  -platform_device_path string\n    \tpath to a platform-specific device file\n";
    const OLD_FLAGS: &str = "  -platform string\n    \tspecifies which platform to use: ptrace (default), kvm. (default \"ptrace\")\n";
    const NEW_RESTORE: &str = "restore [flags] <container id> - restore saved state of container.\n  -background\n    \tallow image loading to continue after restore exits (requires uncompressed checkpoint)\n  -bundle string\n    \tpath to the root of the bundle directory, defaults to the current directory\n  -direct\n    \tuse O_DIRECT for reading checkpoint pages file\n";
    const OLD_RESTORE: &str = "restore [flags] <container id>\n  -bundle string\n    \tpath to the root of the bundle directory\n  -image-path string\n    \tdirectory path to saved container image\n";

    #[test]
    fn a_current_runsc_is_accepted_with_its_restore_options() {
        let info = RunscInfo::parse(
            "runsc version v0.0.0-20260905035102-160fafc42237\nspec: 1.2.1\n",
            NEW_FLAGS,
            NEW_RESTORE,
        );
        assert_eq!(info.version, "v0.0.0-20260905035102-160fafc42237");
        assert!(info.systrap && info.restore_background && info.restore_direct);
        assert!(info.gofer_network_namespace);
        assert_eq!(info.check(), Ok(()));
    }

    #[test]
    fn the_2022_runsc_is_refused_naming_its_version_and_what_is_missing() {
        let info = RunscInfo::parse(
            "runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n",
            OLD_FLAGS,
            OLD_RESTORE,
        );
        assert!(!info.systrap && !info.restore_background && !info.restore_direct);
        assert!(!info.gofer_network_namespace);
        let why = info.check().expect_err("too old");
        assert!(why.contains("0.0~20221219.0"), "{why}");
        assert!(why.contains("systrap"), "{why}");
    }

    #[test]
    fn an_unstamped_build_reports_unknown() {
        let info = RunscInfo::parse("runsc version \nspec: 1.2.1\n", NEW_FLAGS, NEW_RESTORE);
        assert_eq!(info.version, "unknown");
    }
}
