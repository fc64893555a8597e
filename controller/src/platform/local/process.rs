//! The `process` runtime: the workload runs as a plain host process (no isolation), in its
//! own process group, with the first volume's directory as working directory.

use std::path::PathBuf;

use rouse_shared::store::ObjectKey;

use super::env::{inherited_host_env, resolve};
use super::error::Result;
use super::ksm::MERGE_EXEC_COMMAND;
use super::launch::Launch;
use super::layout::{Layout, ensure_dir};
use super::ports::PortMap;
use super::spec::LaunchSpec;

/// Prepares the command line, environment and working directory of a process workload.
pub fn prepare(
    layout: &Layout,
    key: &ObjectKey,
    spec: &LaunchSpec,
    ports: &PortMap,
) -> Result<Launch> {
    let volumes: Vec<(String, PathBuf)> = spec
        .volumes
        .iter()
        .map(|v| (v.name.clone(), layout.volume_dir(key, &v.name)))
        .collect();
    let cwd = match volumes.first() {
        Some((_, dir)) => dir.clone(),
        None => layout.scratch_dir(key),
    };
    ensure_dir(&cwd)?;
    let visible: Vec<(String, String)> = volumes
        .iter()
        .map(|(name, dir)| (name.clone(), dir.display().to_string()))
        .collect();
    let resolved = resolve(spec, inherited_host_env(), ports, &visible);
    let mut argv = resolved.argv.into_iter();
    // `LaunchSpec` guarantees a non-empty command.
    let program = argv.next().unwrap_or_default();
    let (program, args) = match &spec.merge_exec {
        // The trampoline marks itself mergeable, then execs the workload in its place (same
        // pid, group, environment and directory), so the mark is inherited by all it starts.
        Some(trampoline) => {
            let mut args = vec![MERGE_EXEC_COMMAND.to_owned(), "--".to_owned(), program];
            args.extend(argv);
            (trampoline.clone(), args)
        }
        None => (PathBuf::from(program), argv.collect()),
    };
    Ok(Launch {
        program,
        args,
        env: resolved.env,
        cwd,
    })
}
