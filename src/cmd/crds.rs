//! `rouse crds`: print the CRDs, or write them as `deploy/crds/<name>.yaml` files.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use rouse_shared::crds;

/// Arguments of `rouse crds`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Write one `<plural>.<group>.yaml` file per CRD into this directory instead of printing.
    #[arg(long, value_name = "DIR")]
    out_dir: Option<PathBuf>,
}

/// Prints or writes every CRD.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    match &args.out_dir {
        None => print!("{}", crds::all_to_yaml()?),
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for crd in crds::all() {
                let path = dir.join(crds::file_name(&crd));
                std::fs::write(&path, crds::to_yaml(&crd)?)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                println!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
