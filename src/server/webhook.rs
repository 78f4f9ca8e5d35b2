//! catalogd's mutating admission webhook, as upstream's `catalogd` serves it (its
//! `internal/catalogd/webhook` and the MutatingWebhookConfiguration
//! `inject-metadata-name.olm.operatorframework.io` of `config/base/catalogd/manager/webhook`,
//! checked against operator-controller v1.2.0): an AdmissionReview of a ClusterCatalog
//! sent to [`PATH`] is answered with a JSONPatch that sets the label
//! [`crate::api::LABEL_METADATA_NAME`] to the catalog's name, on CREATE and UPDATE;
//! DELETE is allowed untouched; an object that already carries the right label gets no
//! patch. Upstream's defaulter marshals the whole typed object and diffs it against the
//! request, so its patch may also carry fields the API server then resets (an empty
//! `status`); only the label is patched here. The answers follow controller-runtime's
//! webhook handler (a request that is not an AdmissionReview of a ClusterCatalog is
//! answered `allowed: false` with code 400). [`review`] decides, purely; [`router`] is
//! the HTTP edge, served over TLS by the controller
//! (docs/how-to/switch-from-upstream.md).

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, header};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::PathBuf;

/// The path upstream's MutatingWebhookConfiguration calls.
pub const PATH: &str = "/mutate-olm-operatorframework-io-v1-clustercatalog";

/// Where and with which certificate the webhook is served (catalogd's
/// `--webhook-server-port`, `--tls-cert`, `--tls-key`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookServing {
    /// `host:port` to listen on.
    pub bind_address: String,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// An AdmissionReview as the API server sends it (the fields read here).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Review {
    api_version: Option<String>,
    request: Option<Request>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    operation: String,
    #[serde(default)]
    object: Option<Value>,
}

/// `response` of an AdmissionReview.
#[derive(Serialize, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Response {
    pub uid: String,
    pub allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch_type: Option<&'static str>,
    /// base64 of the JSONPatch (Go's `[]byte` in JSON).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<Status>,
}

/// `response.status`: the code and, for a refusal, why.
#[derive(Serialize, Debug, PartialEq)]
pub struct Status {
    pub code: u16,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The JSONPatch operations that give `object` the label
/// [`crate::api::LABEL_METADATA_NAME`] = its `metadata.name` (empty when the
/// object has no name yet, as upstream's defaulter sets it); none when it has it.
pub fn label_patch(object: &Value) -> Vec<Value> {
    let label = crate::api::LABEL_METADATA_NAME;
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    match object
        .pointer("/metadata/labels")
        .and_then(Value::as_object)
    {
        None => vec![json!({"op": "add", "path": "/metadata/labels", "value": {label: name}})],
        Some(labels) => {
            // RFC 6901: `/` in a key is written `~1` (`~` as `~0`).
            let path = format!(
                "/metadata/labels/{}",
                label.replace('~', "~0").replace('/', "~1")
            );
            match labels.get(label).and_then(Value::as_str) {
                Some(value) if value == name => Vec::new(),
                Some(_) => vec![json!({"op": "replace", "path": path, "value": name})],
                None => vec![json!({"op": "add", "path": path, "value": name})],
            }
        }
    }
}

fn refused(uid: String, code: u16, message: String) -> Response {
    Response {
        uid,
        allowed: false,
        patch_type: None,
        patch: None,
        status: Some(Status {
            code,
            message: Some(message),
        }),
    }
}

/// The answer to one AdmissionReview `request`.
fn respond(request: Request) -> Response {
    let uid = request.uid;
    if request.operation == "DELETE" {
        return Response {
            uid,
            allowed: true,
            patch_type: None,
            patch: None,
            status: Some(Status {
                code: 200,
                message: None,
            }),
        };
    }
    let Some(object) = request.object.filter(Value::is_object) else {
        return refused(uid, 400, "there is no content to decode".into());
    };
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let group = object
        .get("apiVersion")
        .and_then(Value::as_str)
        .and_then(|v| v.split_once('/'))
        .map(|(group, _)| group);
    if kind != "ClusterCatalog" || group != Some(crate::api::GROUP) {
        return refused(
            uid,
            400,
            format!("expected a ClusterCatalog but got a {kind:?}"),
        );
    }
    let patch = label_patch(&object);
    if patch.is_empty() {
        return Response {
            uid,
            allowed: true,
            patch_type: None,
            patch: None,
            status: None,
        };
    }
    let encoded = data_encoding::BASE64.encode(Value::Array(patch).to_string().as_bytes());
    Response {
        uid,
        allowed: true,
        patch_type: Some("JSONPatch"),
        patch: Some(encoded),
        status: None,
    }
}

/// The AdmissionReview answering `body` (with `content_type`, which must be JSON as
/// controller-runtime requires).
pub fn review(content_type: Option<&str>, body: &[u8]) -> Value {
    let api_version = "admission.k8s.io/v1".to_string();
    let (api_version, response) = if content_type != Some("application/json") {
        let message = format!(
            "contentType={}, expected application/json",
            content_type.unwrap_or("")
        );
        (api_version, refused(String::new(), 400, message))
    } else {
        match serde_json::from_slice::<Review>(body) {
            Ok(Review {
                api_version: version,
                request: Some(request),
            }) => (version.unwrap_or(api_version), respond(request)),
            Ok(_) => (
                api_version,
                refused(String::new(), 400, "got an empty AdmissionRequest".into()),
            ),
            Err(e) => (api_version, refused(String::new(), 400, e.to_string())),
        }
    };
    json!({"apiVersion": api_version, "kind": "AdmissionReview", "response": response})
}

async fn handle(headers: HeaderMap, body: Bytes) -> axum::Json<Value> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok());
    let answer = review(content_type, &body);
    let allowed = answer.pointer("/response/allowed").and_then(Value::as_bool);
    tracing::debug!(?allowed, "ClusterCatalog admission review");
    axum::Json(answer)
}

/// Largest AdmissionReview read (controller-runtime's webhook limit: an UPDATE carries
/// the object twice, each up to etcd's 1.5 MiB).
pub const MAX_REQUEST_BYTES: usize = 7 << 20;

/// The webhook's HTTP routes: `POST` [`PATH`].
pub fn router() -> Router {
    Router::new()
        .route(PATH, axum::routing::post(handle))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_REQUEST_BYTES))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog(labels: Option<Value>) -> Value {
        let mut metadata = json!({"name": "operatorhubio"});
        if let Some(labels) = labels {
            metadata["labels"] = labels;
        }
        json!({"apiVersion": "olm.operatorframework.io/v1", "kind": "ClusterCatalog",
               "metadata": metadata, "spec": {}})
    }

    fn ask(operation: &str, object: Value) -> Value {
        let body = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "u-1", "operation": operation, "object": object}});
        review(Some("application/json"), body.to_string().as_bytes())
    }

    fn patch_of(answer: &Value) -> Value {
        let encoded = answer["response"]["patch"].as_str().expect("a patch");
        let bytes = data_encoding::BASE64
            .decode(encoded.as_bytes())
            .expect("base64");
        serde_json::from_slice(&bytes).expect("JSON")
    }

    #[test]
    fn the_label_is_added_with_the_labels_map_when_there_is_none() {
        let answer = ask("CREATE", catalog(None));
        assert_eq!(answer["kind"], "AdmissionReview");
        assert_eq!(answer["response"]["uid"], "u-1");
        assert_eq!(answer["response"]["allowed"], true);
        assert_eq!(answer["response"]["patchType"], "JSONPatch");
        assert_eq!(
            patch_of(&answer),
            json!([{"op": "add", "path": "/metadata/labels",
                    "value": {"olm.operatorframework.io/metadata.name": "operatorhubio"}}])
        );
    }

    #[test]
    fn a_missing_or_wrong_label_is_added_or_replaced_and_a_right_one_left_alone() {
        let path = "/metadata/labels/olm.operatorframework.io~1metadata.name";
        let added = ask("UPDATE", catalog(Some(json!({"team": "a"}))));
        assert_eq!(
            patch_of(&added),
            json!([{"op": "add", "path": path, "value": "operatorhubio"}])
        );
        let wrong = json!({"olm.operatorframework.io/metadata.name": "other"});
        let replaced = ask("UPDATE", catalog(Some(wrong)));
        assert_eq!(
            patch_of(&replaced),
            json!([{"op": "replace", "path": path, "value": "operatorhubio"}])
        );
        let right = json!({"olm.operatorframework.io/metadata.name": "operatorhubio"});
        let unchanged = ask("CREATE", catalog(Some(right)));
        assert_eq!(unchanged["response"]["allowed"], true);
        assert!(unchanged["response"].get("patch").is_none());
        assert!(unchanged["response"].get("patchType").is_none());
    }

    #[test]
    fn delete_is_allowed_and_other_requests_are_refused_with_400() {
        let deleted = ask("DELETE", Value::Null);
        assert_eq!(deleted["response"]["allowed"], true);
        assert_eq!(deleted["response"]["status"]["code"], 200);
        let other = ask("CREATE", json!({"apiVersion": "v1", "kind": "ConfigMap"}));
        assert_eq!(other["response"]["allowed"], false);
        assert_eq!(other["response"]["status"]["code"], 400);
        let no_object = ask("CREATE", Value::Null);
        assert_eq!(no_object["response"]["allowed"], false);
        let not_json = review(Some("text/plain"), b"{}");
        assert_eq!(not_json["response"]["status"]["code"], 400);
        let garbage = review(Some("application/json"), b"{");
        assert_eq!(garbage["response"]["allowed"], false);
        let empty = review(Some("application/json"), b"{}");
        assert_eq!(
            empty["response"]["status"]["message"],
            "got an empty AdmissionRequest"
        );
    }

    #[test]
    fn a_catalog_without_a_name_gets_an_empty_label_as_upstream() {
        let mut object = catalog(None);
        object["metadata"] = json!({"generateName": "cat-"});
        assert_eq!(
            label_patch(&object),
            vec![json!({"op": "add", "path": "/metadata/labels",
                        "value": {"olm.operatorframework.io/metadata.name": ""}})]
        );
    }
}
