//! The shared-library closure of host programs, as `ldd` (the dynamic loader itself) lists it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::command::output_within;
use super::{Error, Result};

/// How long one `ldd` run may take.
const DEADLINE: Duration = Duration::from_secs(60);

/// Programs per `ldd` run (it takes many; this keeps the command line short).
const BATCH: usize = 64;

/// Every library `ldd` lists for any of `programs`, the dynamic loader included, at the path
/// `ldd` prints (which is where the loader looks in the image too). Static programs and files
/// that are not dynamic executables add nothing; a library `ldd` cannot find is an error.
pub(crate) fn closure(programs: &[PathBuf]) -> Result<BTreeSet<PathBuf>> {
    let mut libraries = BTreeSet::new();
    for batch in programs.chunks(BATCH) {
        let output = output_within(
            Command::new("ldd").args(batch).env("LC_ALL", "C"),
            "ldd",
            DEADLINE,
        )?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        parse(&stdout, batch, &mut libraries)?;
        // ldd exits 1 when any file is not a dynamic executable and says so on stderr; any
        // other line there is a real failure (a missing file).
        let stderr = String::from_utf8_lossy(&output.stderr);
        let failure = stderr
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && *l != "not a dynamic executable");
        if let Some(line) = failure {
            return Err(Error::Command {
                program: format!("ldd ({} files from {})", batch.len(), batch[0].display()),
                detail: line.to_owned(),
            });
        }
    }
    Ok(libraries)
}

/// Adds the libraries of `ldd`'s output to `libraries`. With several programs, `ldd` heads
/// each block with `program:`; with one it prints the block alone.
fn parse(stdout: &str, programs: &[PathBuf], libraries: &mut BTreeSet<PathBuf>) -> Result<()> {
    let mut current = programs
        .first()
        .map(PathBuf::as_path)
        .unwrap_or(Path::new(""));
    for line in stdout.lines() {
        if !line.starts_with(char::is_whitespace) {
            if let Some(program) = line.strip_suffix(':') {
                current = programs
                    .iter()
                    .find(|p| p.as_os_str() == program)
                    .map(PathBuf::as_path)
                    .unwrap_or(Path::new(program));
            }
            continue;
        }
        let line = line.trim();
        if let Some((name, rest)) = line.split_once("=>") {
            let rest = rest.trim();
            if rest.starts_with("not found") {
                return Err(Error::MissingLibrary {
                    program: current.to_owned(),
                    library: name.trim().to_owned(),
                });
            }
            if let Some(path) = rest
                .split_whitespace()
                .next()
                .filter(|p| p.starts_with('/'))
            {
                libraries.insert(PathBuf::from(path));
            }
        } else if let Some(path) = line
            .split_whitespace()
            .next()
            .filter(|p| p.starts_with('/'))
        {
            // The dynamic loader: `/lib64/ld-linux-x86-64.so.2 (0x...)`.
            libraries.insert(PathBuf::from(path));
        }
        // Otherwise the vDSO (`linux-vdso.so.1 (0x...)`, no file), `statically linked` or
        // `not a dynamic executable`: nothing to copy.
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_multiple_blocks() {
        let one = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x1)\n\t/lib64/ld-linux-x86-64.so.2 (0x2)\n";
        let mut libs = BTreeSet::new();
        parse(one, &[PathBuf::from("/bin/true")], &mut libs).expect("parsed");
        let want: BTreeSet<PathBuf> = [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ]
        .into_iter()
        .map(PathBuf::from)
        .collect();
        assert_eq!(libs, want);

        let many =
            "/bin/a:\n\tlibz.so.1 => /lib/libz.so.1 (0x1)\n/bin/b:\n\tnot a dynamic executable\n";
        let mut libs = BTreeSet::new();
        parse(
            many,
            &[PathBuf::from("/bin/a"), PathBuf::from("/bin/b")],
            &mut libs,
        )
        .expect("parsed");
        assert_eq!(
            libs.into_iter().collect::<Vec<_>>(),
            [PathBuf::from("/lib/libz.so.1")]
        );
    }

    #[test]
    fn a_missing_library_names_the_program() {
        let out =
            "/bin/a:\n\tlibc.so.6 => /lib/libc.so.6 (0x1)\n/bin/b:\n\tlibgone.so.3 => not found\n";
        let err = parse(
            out,
            &[PathBuf::from("/bin/a"), PathBuf::from("/bin/b")],
            &mut BTreeSet::new(),
        )
        .expect_err("a missing library");
        assert_eq!(
            err.to_string(),
            "/bin/b needs libgone.so.3, which ldd does not find"
        );
    }
}
