//! The catalog HTTP API over a small stored catalog: the first line of the input is the
//! request target (path and query), the next lines are `Name: value` headers; a leading
//! `HEAD ` selects HEAD. Invariant: no request makes the server fail (5xx).
#![no_main]

use axum::Router;
use axum::body::Body;
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;
use tower::ServiceExt;

const CATALOG: &str = r#"{"schema":"olm.package","name":"pkg","defaultChannel":"stable"}
{"schema":"olm.channel","package":"pkg","name":"stable","entries":[{"name":"pkg.v1.0.0"}]}
{"schema":"olm.bundle","package":"pkg","name":"pkg.v1.0.0","image":"example.com/pkg@sha256:0000000000000000000000000000000000000000000000000000000000000000","properties":[{"type":"olm.package","value":{"packageName":"pkg","version":"1.0.0"}}]}
"#;

struct Env {
    _dir: tempfile::TempDir,
    router: Router,
    rt: tokio::runtime::Runtime,
}

fn env() -> Option<&'static Env> {
    static ENV: OnceLock<Option<Env>> = OnceLock::new();
    ENV.get_or_init(|| {
        let dir = tempfile::tempdir().ok()?;
        let source = dir.path().join("source.json");
        std::fs::write(&source, CATALOG).ok()?;
        let root = dir.path().join("store");
        olmv1::fbc::store(&root, "cat", &source).ok()?;
        let router = olmv1::server::catalog::router(&root);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        Some(Env {
            _dir: dir,
            router,
            rt,
        })
    })
    .as_ref()
}

fn request(text: &str) -> Option<http::Request<Body>> {
    let mut lines = text.split('\n');
    let first = lines.next()?;
    let (method, target) = match first.strip_prefix("HEAD ") {
        Some(t) => (http::Method::HEAD, t),
        None => (http::Method::GET, first),
    };
    let mut builder = http::Request::builder().method(method).uri(target);
    for line in lines {
        let (name, value) = line.split_once(':')?;
        builder = builder.header(name.trim(), value.trim());
    }
    builder.body(Body::empty()).ok()
}

fuzz_target!(|data: &[u8]| {
    let Some(env) = env() else { return };
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(req) = request(text) else { return };
    env.rt.block_on(async {
        let Ok(resp) = env.router.clone().oneshot(req).await;
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), 64 << 20).await;
        assert!(!status.is_server_error(), "{text:?} -> {status}");
        assert!(body.is_ok(), "{text:?}: body failed");
    });
});
