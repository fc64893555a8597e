//! HTTP routing of the fake API server: maps `/api/v1/...` and `/apis/{group}/{version}/...`
//! paths and verbs onto storage operations and renders results and errors as Kubernetes does.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::{Frame, Incoming};
use serde_json::{Value, json};

use super::delete::{DeleteOptions, Deleted};
use super::patch::PatchKind;
use super::query::Query;
use super::registry::{self, ResourceType};
use super::selector::Selector;
use super::server::ServerState;
use super::status::{ApiError, Result};
use super::watch::{self, Start, WatchRequest};
use super::write::Part;

/// Body type of every response.
pub type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Request bodies above this size get 413, as with the real server's 3 MiB limit.
const BODY_LIMIT: usize = 3 * 1024 * 1024;

/// A parsed API path.
struct Route {
    rt: &'static ResourceType,
    namespace: Option<String>,
    name: Option<String>,
    sub: Option<String>,
}

fn route(path: &str) -> Result<Route> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return Err(ApiError::no_route(path)),
    };
    let owned = |s: &&str| (*s).to_owned();
    let namespaced = |plural: &str| registry::find(group, version, plural).filter(|r| r.namespaced);
    let route = match rest {
        ["namespaces", ns, plural, tail @ ..]
            if namespaced(plural).is_some() && tail.len() <= 2 =>
        {
            Route {
                rt: namespaced(plural).ok_or_else(|| ApiError::no_route(path))?,
                namespace: Some((*ns).to_owned()),
                name: tail.first().map(owned),
                sub: tail.get(1).map(owned),
            }
        }
        [plural, tail @ ..] if tail.len() <= 2 => {
            let rt =
                registry::find(group, version, plural).ok_or_else(|| ApiError::no_route(path))?;
            if rt.namespaced && !tail.is_empty() {
                return Err(ApiError::no_route(path));
            }
            Route {
                rt,
                namespace: None,
                name: tail.first().map(owned),
                sub: tail.get(1).map(owned),
            }
        }
        _ => return Err(ApiError::no_route(path)),
    };
    Ok(route)
}

/// A JSON response.
pub fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    let bytes = serde_json::to_vec(value).unwrap_or_default();
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(bytes)).boxed_unsync())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed_unsync()))
}

/// The `Status` response of an error.
pub fn error_response(error: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &error.to_status())
}

async fn read_body(body: Incoming) -> Result<Bytes> {
    Limited::new(body, BODY_LIMIT)
        .collect()
        .await
        .map(|c| c.to_bytes())
        .map_err(|_| ApiError::too_large(BODY_LIMIT))
}

fn parse_json(bytes: &[u8]) -> Result<Value> {
    serde_json::from_slice(bytes)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

/// Serves one request.
pub async fn handle(state: Arc<ServerState>, request: Request<Incoming>) -> Response<Body> {
    let path = request.uri().path().to_owned();
    if path == "/version" {
        return json_response(
            StatusCode::OK,
            &json!({"major": "1", "minor": "33", "gitVersion": "v1.33.0-fake", "platform": "linux/amd64"}),
        );
    }
    let route = match route(&path) {
        Ok(route) => route,
        Err(error) => {
            // Unknown paths are counted under one key so the counter map stays bounded.
            let _ = state.admit("unknown", "unknown");
            return error_response(&error);
        }
    };
    let query = Query::parse(request.uri().query());
    match dispatch(&state, route, query, request).await {
        Ok(response) => response,
        Err(error) => error_response(&error),
    }
}

async fn dispatch(
    state: &Arc<ServerState>,
    route: Route,
    query: Query,
    request: Request<Incoming>,
) -> Result<Response<Body>> {
    if query.get("dryRun").is_some() {
        return Err(ApiError::bad_request(
            "dryRun is not supported by the fake API server",
        ));
    }
    let method = request.method().clone();
    let content_type = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .to_owned();
    let body = read_body(request.into_body()).await?;
    let rt = route.rt;
    let storage = &state.storage;
    let ns = route.namespace.clone().unwrap_or_default();
    let resource = match &route.sub {
        Some(sub) => format!("{}/{sub}", rt.plural),
        None => rt.plural.to_owned(),
    };
    let Some(name) = route.name.clone() else {
        return collection(state, &route, &query, &method, &body);
    };
    let sub = route.sub.as_deref();
    let part = match sub {
        None => Part::Main,
        Some("status") if rt.status => Part::Status,
        Some("scale") if rt.scale => {
            return scale(
                state,
                rt,
                &ns,
                &name,
                &method,
                &content_type,
                &body,
                &resource,
            );
        }
        Some(other) => {
            return Err(ApiError::no_route(&format!(
                "{} subresource {other}",
                rt.qualified()
            )));
        }
    };
    let ok = |v: Value| Ok(json_response(StatusCode::OK, &v));
    match method {
        Method::GET => {
            state.admit("get", &resource)?;
            let object = storage
                .get(rt, &ns, &name)
                .ok_or_else(|| ApiError::not_found(rt, &name))?;
            ok(object)
        }
        Method::PUT => {
            state.admit("update", &resource)?;
            ok(storage.update(rt, &ns, &name, parse_json(&body)?, part)?)
        }
        Method::PATCH => {
            let kind = PatchKind::from_content_type(&content_type)?;
            state.admit(kind.verb(), &resource)?;
            if kind == PatchKind::Apply && query.get("fieldManager").is_none_or(str::is_empty) {
                return Err(ApiError::bad_request(
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            let existed = storage.get(rt, &ns, &name).is_some();
            let object = storage.patch(rt, &ns, &name, kind, &body, part)?;
            let code = if existed {
                StatusCode::OK
            } else {
                StatusCode::CREATED
            };
            Ok(json_response(code, &object))
        }
        Method::DELETE if part == Part::Main => {
            state.admit("delete", &resource)?;
            let options = DeleteOptions::parse(&body, query.pairs())?;
            // Kubernetes answers 200 whether the object went at once or is only marked.
            match storage.delete(rt, &ns, &name, &options)? {
                Deleted::Gone(object) | Deleted::Pending(object) => ok(object),
            }
        }
        _ => Err(ApiError::method_not_allowed(&format!(
            "{method} {resource}"
        ))),
    }
}

fn collection(
    state: &Arc<ServerState>,
    route: &Route,
    query: &Query,
    method: &Method,
    body: &[u8],
) -> Result<Response<Body>> {
    let rt = route.rt;
    let ns = route.namespace.as_deref();
    let labels = query.selector("labelSelector")?;
    let fields = query.selector("fieldSelector")?;
    let keep = |o: &Value| labels.matches_labels(o) && fields.matches_fields(o);
    match *method {
        Method::GET if query.flag("watch") => {
            state.admit("watch", rt.plural)?;
            watch_response(state, route, query, labels.clone(), fields.clone())
        }
        Method::GET => {
            state.admit("list", rt.plural)?;
            if query.get("continue").is_some_and(|c| !c.is_empty()) {
                return Err(ApiError::bad_request(
                    "invalid continue token: the fake API server never hands one out",
                ));
            }
            let (items, rv) = state.storage.list(rt, ns, keep);
            Ok(json_response(StatusCode::OK, &list_body(rt, items, rv)))
        }
        Method::POST => {
            state.admit("create", rt.plural)?;
            let Some(ns) = ns.or((!rt.namespaced).then_some("")) else {
                return Err(ApiError::method_not_allowed(&format!(
                    "POST {} without a namespace",
                    rt.plural
                )));
            };
            let object = state.storage.create(rt, ns, parse_json(body)?)?;
            Ok(json_response(StatusCode::CREATED, &object))
        }
        Method::DELETE => {
            state.admit("deletecollection", rt.plural)?;
            let options = DeleteOptions::parse(body, query.pairs())?;
            let (items, _) = state.storage.list(rt, ns, keep);
            let mut deleted = Vec::new();
            for item in items {
                let namespace = item["metadata"]["namespace"].as_str().unwrap_or_default();
                let name = item["metadata"]["name"].as_str().unwrap_or_default();
                match state.storage.delete(rt, namespace, name, &options) {
                    Ok(Deleted::Gone(o) | Deleted::Pending(o)) => deleted.push(o),
                    Err(e) if e.code == 404 => {}
                    Err(e) => return Err(e),
                }
            }
            let rv = state.storage.resource_version();
            Ok(json_response(StatusCode::OK, &list_body(rt, deleted, rv)))
        }
        _ => Err(ApiError::method_not_allowed(&format!(
            "{method} {}",
            rt.plural
        ))),
    }
}

fn list_body(rt: &ResourceType, items: Vec<Value>, rv: u64) -> Value {
    json!({
        "kind": format!("{}List", rt.kind),
        "apiVersion": rt.api_version(),
        "metadata": {"resourceVersion": rv.to_string()},
        "items": items,
    })
}

fn watch_response(
    state: &Arc<ServerState>,
    route: &Route,
    query: &Query,
    labels: Selector,
    fields: Selector,
) -> Result<Response<Body>> {
    let rv = query.get("resourceVersion").unwrap_or_default();
    let initial = query.flag("sendInitialEvents");
    let start = match rv {
        "" | "0" => Start::Now {
            end_bookmark: initial,
        },
        _ if initial => Start::Now { end_bookmark: true },
        rv => Start::After(rv.parse().map_err(|_| {
            ApiError::bad_request(format!("resourceVersion {rv:?} is not a valid version"))
        })?),
    };
    let timeout = match query.get("timeoutSeconds") {
        Some(t) => Some(Duration::from_secs(t.parse().map_err(|_| {
            ApiError::bad_request(format!("timeoutSeconds {t:?} is not a whole number"))
        })?)),
        None => None,
    };
    let request = WatchRequest {
        rt: route.rt,
        namespace: route.namespace.clone(),
        labels,
        fields,
        start,
        timeout,
        bookmarks: query.flag("allowWatchBookmarks"),
    };
    let events = watch::stream(state.storage.clone(), request, state.bookmark_interval)
        .map(|bytes| Ok::<_, Infallible>(Frame::data(bytes)));
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(StreamBody::new(events).boxed_unsync())
        .map_err(|e| ApiError::internal(format!("building the watch response: {e}")))
}

#[allow(clippy::too_many_arguments)]
fn scale(
    state: &Arc<ServerState>,
    rt: &'static ResourceType,
    ns: &str,
    name: &str,
    method: &Method,
    content_type: &str,
    body: &[u8],
    resource: &str,
) -> Result<Response<Body>> {
    let storage = &state.storage;
    let scale = match *method {
        Method::GET => {
            state.admit("get", resource)?;
            storage.scale(rt, ns, name)?
        }
        Method::PUT => {
            state.admit("update", resource)?;
            storage.update_scale(rt, ns, name, parse_json(body)?)?
        }
        Method::PATCH => {
            let kind = PatchKind::from_content_type(content_type)?;
            state.admit(kind.verb(), resource)?;
            storage.patch_scale(rt, ns, name, kind, body)?
        }
        _ => {
            return Err(ApiError::method_not_allowed(&format!(
                "{method} {resource}"
            )));
        }
    };
    Ok(json_response(StatusCode::OK, &scale))
}
