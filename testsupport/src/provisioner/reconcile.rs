//! The two controllers: claims (provision) and volumes (reclaim), each reconcile bounded by
//! the configured deadline.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, PostParams, Preconditions};
use kube::runtime::controller::{self, Action, Controller};
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::plan::{ClaimDecision, VolumeDecision, plan_claim, plan_volume};
use super::{Error, ProvisionerConfig, Result};

/// Shared by every reconcile.
struct Context {
    client: Client,
    config: ProvisionerConfig,
}

/// Runs both controllers until `stop`.
pub(crate) async fn run(client: Client, config: ProvisionerConfig, stop: CancellationToken) {
    let settings = controller::Config::default().concurrency(config.concurrency.max(1));
    let ctx = Arc::new(Context {
        client: client.clone(),
        config,
    });
    let claims = Controller::new(
        Api::<PersistentVolumeClaim>::all(client.clone()),
        watcher::Config::default(),
    )
    .with_config(settings.clone())
    .graceful_shutdown_on(stop.clone().cancelled_owned())
    .run(reconcile_claim, error_policy, ctx.clone())
    .for_each(|_| async {});
    let volumes = Controller::new(
        Api::<PersistentVolume>::all(client),
        watcher::Config::default(),
    )
    .with_config(settings)
    .graceful_shutdown_on(stop.cancelled_owned())
    .run(reconcile_volume, error_policy, ctx)
    .for_each(|_| async {});
    tokio::join!(claims, volumes);
}

async fn reconcile_claim(claim: Arc<PersistentVolumeClaim>, ctx: Arc<Context>) -> Result<Action> {
    let what = format!(
        "PersistentVolumeClaim {}/{}",
        claim.namespace().unwrap_or_default(),
        claim.name_any()
    );
    let span = tracing::debug_span!("provision", claim = %what);
    within(&ctx, what, provision(&claim, &ctx).instrument(span)).await
}

async fn provision(claim: &PersistentVolumeClaim, ctx: &Context) -> Result<Action> {
    let class_name = claim
        .spec
        .as_ref()
        .and_then(|s| s.storage_class_name.clone())
        .unwrap_or_default();
    let class = if class_name.is_empty() {
        None
    } else {
        Api::<StorageClass>::all(ctx.client.clone())
            .get_opt(&class_name)
            .await
            .map_err(api(format!("get StorageClass {class_name}")))?
    };
    // A claim we cannot serve stays Pending until it changes: retrying would not help.
    let decision = plan_claim(claim, class.as_ref(), &ctx.config);
    let decision = match decision {
        Ok(decision) => decision,
        Err(error) => {
            tracing::warn!(error = %error, "claim not provisioned");
            return Ok(Action::await_change());
        }
    };
    let volume = match decision {
        ClaimDecision::Skip(reason) => {
            tracing::debug!(reason, "claim skipped");
            return Ok(Action::await_change());
        }
        ClaimDecision::Retry(reason) => {
            tracing::debug!(reason, "claim retried later");
            return Ok(Action::requeue(ctx.config.retry_after));
        }
        ClaimDecision::Provision(volume) => volume,
    };
    let name = volume.name_any();
    let volumes: Api<PersistentVolume> = Api::all(ctx.client.clone());
    if volumes
        .get_opt(&name)
        .await
        .map_err(api(format!("get PersistentVolume {name}")))?
        .is_some()
    {
        return Ok(Action::await_change());
    }
    let path = volume
        .spec
        .as_ref()
        .and_then(|s| s.host_path.as_ref())
        .map(|h| h.path.clone())
        .unwrap_or_default();
    create_dir(Path::new(&path)).await?;
    match volumes.create(&PostParams::default(), &volume).await {
        Ok(_) => tracing::info!(volume = %name, path, "volume provisioned"),
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => return Err(api(format!("create PersistentVolume {name}"))(e)),
    }
    Ok(Action::await_change())
}

async fn reconcile_volume(volume: Arc<PersistentVolume>, ctx: Arc<Context>) -> Result<Action> {
    let what = format!("PersistentVolume {}", volume.name_any());
    let span = tracing::debug_span!("reclaim", volume = %volume.name_any());
    within(&ctx, what, reclaim(&volume, &ctx).instrument(span)).await
}

async fn reclaim(volume: &PersistentVolume, ctx: &Context) -> Result<Action> {
    // A volume whose path leaves the base directory is never touched, however often seen.
    let decision = match plan_volume(volume, &ctx.config) {
        Ok(decision) => decision,
        Err(error) => {
            tracing::warn!(error = %error, "volume not reclaimed");
            return Ok(Action::await_change());
        }
    };
    let path = match decision {
        VolumeDecision::Skip(reason) => {
            tracing::trace!(reason, "volume skipped");
            return Ok(Action::await_change());
        }
        VolumeDecision::Reclaim(path) => path,
    };
    match tokio::fs::remove_dir_all(&path).await {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(Error::Directory {
                action: "remove",
                path,
                source,
            });
        }
    }
    let name = volume.name_any();
    // Only this volume: not a new one that took its name meanwhile.
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: volume.uid(),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match Api::<PersistentVolume>::all(ctx.client.clone())
        .delete(&name, &params)
        .await
    {
        Ok(_) => tracing::info!(volume = %name, path = %path.display(), "volume reclaimed"),
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => return Err(api(format!("delete PersistentVolume {name}"))(e)),
    }
    Ok(Action::await_change())
}

/// Makes the volume's directory, writable by every user (a pod may run as any uid).
async fn create_dir(path: &Path) -> Result<()> {
    let fail = |source| Error::Directory {
        action: "create",
        path: path.to_owned(),
        source,
    };
    tokio::fs::create_dir_all(path).await.map_err(fail)?;
    // Set after creation: the process umask applies to `create_dir_all`.
    tokio::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777))
        .await
        .map_err(fail)
}

/// Runs one reconcile within the configured deadline.
async fn within(
    ctx: &Context,
    what: String,
    work: impl Future<Output = Result<Action>>,
) -> Result<Action> {
    let deadline = ctx.config.reconcile_deadline;
    tokio::time::timeout(deadline, work)
        .await
        .map_err(|_| Error::Deadline { what, deadline })?
}

fn error_policy<K>(_: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    tracing::warn!(error = %error, "provisioner reconcile failed; retrying");
    Action::requeue(ctx.config.retry_after)
}

fn api(action: String) -> impl FnOnce(kube::Error) -> Error {
    move |source| Error::Api { action, source }
}
