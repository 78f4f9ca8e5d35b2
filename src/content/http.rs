//! The catalogd HTTP API side of the content client: `metas?package=` with the `/all`
//! fallback, bodies streamed line by line within the body and line limits, and the raw
//! download used by the command-line tools. No caching here (that is the parent's job).

use std::sync::atomic::Ordering;

use futures::StreamExt;

use super::{ContentClient, ContentError, Endpoint, compact};
use crate::fbc::model::{PackageContent, SCHEMA_PACKAGE};

impl ContentClient {
    /// Whether `ep`'s server is known to have no `metas` endpoint.
    fn lacks_metas(&self, ep: &Endpoint) -> bool {
        self.no_metas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&ep.base_url)
    }

    /// Remembers that `ep`'s server has no `metas` endpoint.
    fn mark_lacks_metas(&self, ep: &Endpoint) {
        self.no_metas
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(ep.base_url.clone());
    }

    /// Fetches the package from the server (no cache): `metas?package=`, falling back
    /// to `/all` when `metas` answers 404 or 405.
    pub async fn fetch(
        &self,
        ep: &Endpoint,
        package: &str,
    ) -> Result<PackageContent, ContentError> {
        if !self.lacks_metas(ep) {
            let url = self.url(ep, "metas", &[("package", package)])?;
            self.counters.metas_requests.fetch_add(1, Ordering::Relaxed);
            match self
                .get_lines(ep, &url, self.config.max_body_bytes, package, false)
                .await
            {
                Ok(mut content) => {
                    // catalogd's index (and this project's) is by the `package` field,
                    // which the `olm.package` blob lacks: ask for it by name.
                    if content.package.is_none() && !content.is_empty() {
                        let url = self.url(
                            ep,
                            "metas",
                            &[("schema", SCHEMA_PACKAGE), ("name", package)],
                        )?;
                        self.counters.metas_requests.fetch_add(1, Ordering::Relaxed);
                        let pkg = self
                            .get_lines(ep, &url, self.config.max_body_bytes, package, true)
                            .await
                            .map_err(|e| not_found(ep, &url, e))?;
                        content.package = pkg.package;
                    }
                    return Ok(content);
                }
                Err(FetchError::NoEndpoint) => {
                    tracing::info!(catalog = %ep.catalog, url = %url,
                        "catalog server has no metas endpoint, falling back to /api/v1/all");
                    self.mark_lacks_metas(ep);
                }
                Err(FetchError::Other(e)) => return Err(e),
            }
        }
        let url = self.url(ep, "all", &[])?;
        self.counters.all_requests.fetch_add(1, Ordering::Relaxed);
        self.get_lines(ep, &url, self.config.max_all_bytes, package, true)
            .await
            .map_err(|e| not_found(ep, &url, e))
    }

    /// `<base>/api/v1/<endpoint>?<query>`; only http and https.
    fn url(
        &self,
        ep: &Endpoint,
        endpoint: &str,
        query: &[(&str, &str)],
    ) -> Result<reqwest::Url, ContentError> {
        let text = format!("{}/api/v1/{endpoint}", ep.base_url);
        let mut url = reqwest::Url::parse(&text).map_err(|e| ContentError::BadUrl {
            catalog: ep.catalog.clone(),
            url: text.clone(),
            detail: e.to_string(),
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ContentError::BadUrl {
                catalog: ep.catalog.clone(),
                url: text,
                detail: "scheme must be http or https".to_string(),
            });
        }
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// GETs `url` and parses the JSON Lines body into the package's compact content as
    /// it streams in (`filter`: skip lines of other packages).
    async fn get_lines(
        &self,
        ep: &Endpoint,
        url: &reqwest::Url,
        max_body: u64,
        package: &str,
        filter: bool,
    ) -> Result<PackageContent, FetchError> {
        let mut content = PackageContent::default();
        self.stream_lines(ep, url, max_body, &mut |line| {
            compact::push_line(&mut content, line, package, filter)
        })
        .await?;
        compact::finish(&mut content);
        Ok(content)
    }

    /// GETs `url` and calls `on_line` with every line of the body (without the
    /// newline) as it streams in, enforcing the body and line limits. 404/405 are
    /// [`FetchError::NoEndpoint`].
    async fn stream_lines(
        &self,
        ep: &Endpoint,
        url: &reqwest::Url,
        max_body: u64,
        on_line: &mut (dyn FnMut(&[u8]) -> Result<(), String> + Send),
    ) -> Result<(), FetchError> {
        let err_request = |detail: String| ContentError::Request {
            catalog: ep.catalog.clone(),
            url: url.to_string(),
            detail,
        };
        self.counters.requests.fetch_add(1, Ordering::Relaxed);
        let response = self
            .http()
            .get(url.clone())
            .header(reqwest::header::ACCEPT, "application/jsonl")
            .send()
            .await
            .map_err(|e| err_request(error_chain(&e)))?;
        let status = response.status();
        if status == reqwest::StatusCode::NOT_FOUND
            || status == reqwest::StatusCode::METHOD_NOT_ALLOWED
        {
            return Err(FetchError::NoEndpoint);
        }
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            let body: String = body.trim().chars().take(512).collect();
            return Err(ContentError::Status {
                catalog: ep.catalog.clone(),
                url: url.to_string(),
                status: status.as_u16(),
                body,
            }
            .into());
        }
        if response.content_length().is_some_and(|n| n > max_body) {
            return Err(self.too_large(ep, url, "response body", max_body));
        }
        let mut pending: Vec<u8> = Vec::new();
        let mut total: u64 = 0;
        let mut line_no: usize = 0;
        let mut stream = response.bytes_stream();
        let mut parse = |line: &[u8], line_no: usize| {
            on_line(line).map_err(|detail| {
                FetchError::from(ContentError::Parse {
                    catalog: ep.catalog.clone(),
                    url: url.to_string(),
                    detail: format!("line {line_no}: {detail}"),
                })
            })
        };
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| err_request(error_chain(&e)))?;
            total += chunk.len() as u64;
            if total > max_body {
                return Err(self.too_large(ep, url, "response body", max_body));
            }
            let mut rest: &[u8] = &chunk;
            while let Some(i) = memchr::memchr(b'\n', rest) {
                line_no += 1;
                if pending.is_empty() {
                    parse(&rest[..i], line_no)?;
                } else {
                    pending.extend_from_slice(&rest[..i]);
                    parse(&pending, line_no)?;
                    pending.clear();
                }
                rest = &rest[i + 1..];
            }
            pending.extend_from_slice(rest);
            if pending.len() > self.config.max_line_bytes {
                return Err(self.too_large(
                    ep,
                    url,
                    "a line of the body",
                    self.config.max_line_bytes as u64,
                ));
            }
        }
        if !pending.is_empty() {
            parse(&pending, line_no + 1)?;
        }
        Ok(())
    }

    /// Writes the catalog's raw FBC blobs (JSON Lines, as served) to `out`: the whole
    /// catalog, or one package (`metas?package=`, or `/all` filtered when the server
    /// lacks `metas`). Not cached. Returns the number of blobs written.
    pub async fn download(
        &self,
        ep: &Endpoint,
        package: Option<&str>,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<u64, ContentError> {
        let mut written: u64 = 0;
        let mut write_line = |line: &[u8], keep: bool| -> Result<(), String> {
            if !keep || line.iter().all(u8::is_ascii_whitespace) {
                return Ok(());
            }
            written += 1;
            out.write_all(line)
                .and_then(|()| out.write_all(b"\n"))
                .map_err(|e| format!("writing the catalog: {e}"))
        };
        if let Some(p) = package
            && !self.lacks_metas(ep)
        {
            // catalogd's `metas?package=` has no `olm.package` blob (its package is in
            // `name`): ask for it first, by name, then for the package's blobs.
            let package_blob = self.url(ep, "metas", &[("schema", SCHEMA_PACKAGE), ("name", p)])?;
            let url = self.url(ep, "metas", &[("package", p)])?;
            let mut result = Ok(());
            for u in [&package_blob, &url] {
                self.counters.metas_requests.fetch_add(1, Ordering::Relaxed);
                result = self
                    .stream_lines(ep, u, self.config.max_body_bytes, &mut |l| {
                        // Older servers also return the olm.package blob for ?package=.
                        let again = u == &url
                            && serde_json::from_slice::<compact::MetaView>(l)
                                .is_ok_and(|m| m.schema == SCHEMA_PACKAGE);
                        write_line(l, !again)
                    })
                    .await;
                if result.is_err() {
                    break;
                }
            }
            match result {
                Ok(()) => return Ok(written),
                Err(FetchError::NoEndpoint) => {
                    self.mark_lacks_metas(ep);
                }
                Err(FetchError::Other(e)) => return Err(e),
            }
        }
        let url = self.url(ep, "all", &[])?;
        self.counters.all_requests.fetch_add(1, Ordering::Relaxed);
        self.stream_lines(ep, &url, self.config.max_all_bytes, &mut |l| {
            let keep = match package {
                None => true,
                Some(p) => {
                    let meta: compact::MetaView =
                        serde_json::from_slice(l).map_err(|e| e.to_string())?;
                    meta.package() == p
                }
            };
            write_line(l, keep)
        })
        .await
        .map_err(|e| not_found(ep, &url, e))?;
        Ok(written)
    }

    /// [`ContentError::TooLarge`] for `url`.
    fn too_large(
        &self,
        ep: &Endpoint,
        url: &reqwest::Url,
        what: &'static str,
        limit: u64,
    ) -> FetchError {
        ContentError::TooLarge {
            catalog: ep.catalog.clone(),
            url: url.to_string(),
            what,
            limit,
        }
        .into()
    }
}

enum FetchError {
    /// 404 or 405: the endpoint does not exist on this server.
    NoEndpoint,
    Other(ContentError),
}

impl From<ContentError> for FetchError {
    fn from(e: ContentError) -> Self {
        FetchError::Other(e)
    }
}

/// A 404/405 from `/all`: there is nothing to fall back to.
fn not_found(ep: &Endpoint, url: &reqwest::Url, e: FetchError) -> ContentError {
    match e {
        FetchError::NoEndpoint => ContentError::Status {
            catalog: ep.catalog.clone(),
            url: url.to_string(),
            status: 404,
            body: "not found (is the catalog's status.urls.base right?)".to_string(),
        },
        FetchError::Other(e) => e,
    }
}

/// An error with its sources, `a: b: c`.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(inner) = cur {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        cur = inner.source();
    }
    if let Some(hint) = certificate_hint(&s) {
        s.push_str(" (");
        s.push_str(hint);
        s.push(')');
    }
    s
}

/// What to do about a TLS certificate failure of the catalog server, if `chain` is one.
fn certificate_hint(chain: &str) -> Option<&'static str> {
    if chain.contains("UnknownIssuer") {
        Some(
            "the catalog server's certificate is not signed by a trusted CA: give its CA with --catalogd-cas-dir",
        )
    } else if chain.contains("invalid peer certificate") {
        Some(
            "the catalog server's TLS certificate was rejected: check its name, validity and --catalogd-cas-dir",
        )
    } else {
        None
    }
}
