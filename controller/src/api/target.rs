//! Which objects a request names, read from its path: `/v1/...` or the Kubernetes-style
//! `/apis/{group}/{version}/...`, whose group and version must be the kind's.

use std::collections::HashMap;

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use rouse_shared::api::VERSION;
use rouse_shared::store::ObjectKey;

use super::kinds::Kind;
use super::status::Failure;

/// A collection: a kind in one namespace, or in all.
#[derive(Debug, Clone)]
pub(super) struct Collection {
    /// The kind.
    pub kind: Kind,
    /// The namespace, or `None` for all.
    pub namespace: Option<String>,
}

/// One object of a kind.
#[derive(Debug, Clone)]
pub(super) struct Named {
    /// The kind.
    pub kind: Kind,
    /// Its namespace and name.
    pub key: ObjectKey,
}

/// The path parameters, with the kind resolved and the group and version checked.
async fn resolve(parts: &mut Parts) -> Result<(Kind, HashMap<String, String>), Failure> {
    let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, &())
        .await
        .map_err(|e| Failure::bad_request(format!("invalid path: {e}")))?;
    let path = parts.uri.path();
    let plural = params.get("plural").map_or("", String::as_str);
    let kind = Kind::from_plural(plural).ok_or_else(|| Failure::no_route(path))?;
    if let Some(group) = params.get("group") {
        let version = params.get("version").map_or("", String::as_str);
        if group != kind.group() || version != VERSION {
            return Err(Failure::no_route(path));
        }
    }
    Ok((kind, params))
}

impl<S: Send + Sync> FromRequestParts<S> for Collection {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Failure> {
        let (kind, mut params) = resolve(parts).await?;
        Ok(Collection {
            kind,
            namespace: params.remove("ns"),
        })
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Named {
    type Rejection = Failure;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Failure> {
        let (kind, mut params) = resolve(parts).await?;
        let (Some(namespace), Some(name)) = (params.remove("ns"), params.remove("name")) else {
            return Err(Failure::no_route(parts.uri.path()));
        };
        Ok(Named {
            kind,
            key: ObjectKey { namespace, name },
        })
    }
}
