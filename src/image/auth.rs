//! Pull secrets: parsing `kubernetes.io/dockerconfigjson` data (`{"auths": {host:
//! {"auth": base64(user:pass)} | {"username", "password"}}}`) and choosing the
//! credentials for a registry host. Pure functions, no I/O.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::error::ImageError;

/// Username/password for one registry.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Credentials {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// A JSON error about secret content, without the content: serde's messages quote the
/// offending value (`invalid type: string "<the password>"`), so only the kind of
/// problem and its position are kept.
fn redacted(e: &serde_json::Error) -> String {
    let what = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not valid JSON",
        serde_json::error::Category::Eof => "truncated JSON",
        serde_json::error::Category::Data => {
            "not of the form {\"auths\": {host: {\"auth\": …} | {\"username\": …, \"password\": …}}}"
        }
    };
    format!("{what} (line {} column {})", e.line(), e.column())
}

/// The parsed `auths` of one or more docker config files; the first entry added for a
/// host wins (add the most specific secrets first).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DockerConfig {
    /// normalized host (`host[:port]`) → credentials, in insertion order of precedence
    entries: Vec<(String, Credentials)>,
}

#[derive(Deserialize)]
struct RawConfig {
    #[serde(default)]
    auths: BTreeMap<String, RawAuth>,
}

#[derive(Deserialize)]
struct RawAuth {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

impl DockerConfig {
    /// Parse the `.dockerconfigjson` value of a Secret (`name` is used in error messages).
    pub fn parse(name: &str, json: &[u8]) -> Result<Self, ImageError> {
        let err = |detail: String| ImageError::PullSecret {
            name: name.to_string(),
            detail,
        };
        let raw: RawConfig = serde_json::from_slice(json)
            .map_err(|e| err(format!("invalid .dockerconfigjson: {}", redacted(&e))))?;
        let mut entries = Vec::new();
        for (key, a) in raw.auths {
            let creds = match (a.username, a.password, a.auth) {
                (Some(username), Some(password), _) if !username.is_empty() => {
                    Credentials { username, password }
                }
                (_, _, Some(auth)) if !auth.is_empty() => {
                    let decoded = data_encoding::BASE64
                        .decode(auth.trim().as_bytes())
                        .map_err(|e| err(format!("auths[{key:?}].auth is not base64: {e}")))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| err(format!("auths[{key:?}].auth is not UTF-8")))?;
                    let (u, p) = text.split_once(':').ok_or_else(|| {
                        err(format!(
                            "auths[{key:?}].auth does not decode to user:password"
                        ))
                    })?;
                    Credentials {
                        username: u.to_string(),
                        password: p.to_string(),
                    }
                }
                _ => continue,
            };
            entries.push((normalize_host(&key), creds));
        }
        Ok(DockerConfig { entries })
    }

    /// Read a pull Secret: type `kubernetes.io/dockerconfigjson` (key
    /// `.dockerconfigjson`) or the legacy `kubernetes.io/dockercfg` (key `.dockercfg`,
    /// the `auths` map without the wrapper).
    pub fn from_secret(secret: &k8s_openapi::api::core::v1::Secret) -> Result<Self, ImageError> {
        let name = format!(
            "{}/{}",
            secret.metadata.namespace.as_deref().unwrap_or(""),
            secret.metadata.name.as_deref().unwrap_or("")
        );
        let data = secret.data.as_ref();
        let get = |k: &str| data.and_then(|d| d.get(k)).map(|b| b.0.as_slice());
        match (
            secret.type_.as_deref(),
            get(".dockerconfigjson"),
            get(".dockercfg"),
        ) {
            (_, Some(json), _) => Self::parse(&name, json),
            (_, None, Some(legacy)) => {
                let inner: serde_json::Value =
                    serde_json::from_slice(legacy).map_err(|e| ImageError::PullSecret {
                        name: name.clone(),
                        detail: format!("invalid .dockercfg: {}", redacted(&e)),
                    })?;
                let wrapped = serde_json::json!({ "auths": inner });
                Self::parse(&name, wrapped.to_string().as_bytes())
            }
            (t, None, None) => Err(ImageError::PullSecret {
                name,
                detail: format!(
                    "secret of type {:?} has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)",
                    t.unwrap_or("")
                ),
            }),
        }
    }

    /// Parse a `kubernetes.io/dockerconfigjson` Secret's data map (values already
    /// base64-decoded by the Kubernetes client).
    pub fn from_secret_data(
        name: &str,
        data: &BTreeMap<String, Vec<u8>>,
    ) -> Result<Self, ImageError> {
        match data.get(".dockerconfigjson") {
            Some(json) => Self::parse(name, json),
            None => Err(ImageError::PullSecret {
                name: name.to_string(),
                detail: "secret has no .dockerconfigjson key (type kubernetes.io/dockerconfigjson expected)"
                    .to_string(),
            }),
        }
    }

    /// Add one host's credentials (lower precedence than those already present).
    pub fn insert(&mut self, host: &str, creds: Credentials) {
        self.entries.push((normalize_host(host), creds));
    }

    /// Append all entries of `other` with lower precedence.
    pub fn merge(&mut self, other: &DockerConfig) {
        self.entries.extend(other.entries.iter().cloned());
    }

    /// Credentials for registry `host` (`host[:port]`), if any.
    pub fn credentials_for(&self, host: &str) -> Option<&Credentials> {
        let want = normalize_host(host);
        self.entries
            .iter()
            .find(|(h, _)| *h == want)
            .map(|(_, c)| c)
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `https://index.docker.io/v1/` → `docker.io`, `http://reg:5000/path` → `reg:5000`.
pub fn normalize_host(key: &str) -> String {
    let k = key.trim();
    let k = k
        .strip_prefix("https://")
        .or_else(|| k.strip_prefix("http://"))
        .unwrap_or(k);
    let host = k.split('/').next().unwrap_or(k).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".to_string()
        }
        _ => host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_auth_and_username_password_and_picks_by_host() {
        let json = br#"{"auths":{
            "https://index.docker.io/v1/":{"auth":"dXNlcjpwYTpzcw=="},
            "127.0.0.1:5001":{"username":"alice","password":"secret"},
            "quay.io":{"email":"x"}
        }}"#;
        let cfg = DockerConfig::parse("s", json).unwrap();
        let d = cfg.credentials_for("registry-1.docker.io").unwrap();
        assert_eq!(
            (d.username.as_str(), d.password.as_str()),
            ("user", "pa:ss")
        );
        let l = cfg.credentials_for("127.0.0.1:5001").unwrap();
        assert_eq!(l.username, "alice");
        assert!(cfg.credentials_for("127.0.0.1:5002").is_none());
        assert!(cfg.credentials_for("quay.io").is_none());
        assert!(!format!("{l:?}").contains("secret"));
    }

    #[test]
    fn rejects_bad_base64_and_missing_key() {
        let e = DockerConfig::parse("ps", br#"{"auths":{"r":{"auth":"!!"}}}"#).unwrap_err();
        assert!(
            e.to_string().contains("pull secret ps") && e.to_string().contains("base64"),
            "{e}"
        );
        let e = DockerConfig::from_secret_data("ps2", &BTreeMap::new()).unwrap_err();
        assert!(e.to_string().contains(".dockerconfigjson"), "{e}");
        let e = DockerConfig::parse("ps3", b"{").unwrap_err();
        assert!(e.to_string().contains("invalid .dockerconfigjson"), "{e}");
    }

    #[test]
    fn reads_secrets_of_both_types() {
        use k8s_openapi::ByteString;
        use k8s_openapi::api::core::v1::Secret;
        let mut s = Secret::default();
        s.metadata.name = Some("pull".into());
        s.metadata.namespace = Some("olmv1-system".into());
        s.type_ = Some("kubernetes.io/dockerconfigjson".into());
        s.data = Some(BTreeMap::from([(
            ".dockerconfigjson".to_string(),
            ByteString(br#"{"auths":{"reg:1":{"username":"u","password":"p"}}}"#.to_vec()),
        )]));
        let c = DockerConfig::from_secret(&s).unwrap();
        assert_eq!(c.credentials_for("reg:1").unwrap().password, "p");
        s.type_ = Some("kubernetes.io/dockercfg".into());
        s.data = Some(BTreeMap::from([(
            ".dockercfg".to_string(),
            ByteString(br#"{"reg:2":{"auth":"dTpw"}}"#.to_vec()),
        )]));
        let c = DockerConfig::from_secret(&s).unwrap();
        assert_eq!(c.credentials_for("reg:2").unwrap().username, "u");
        s.type_ = Some("Opaque".into());
        s.data = None;
        let e = DockerConfig::from_secret(&s).unwrap_err();
        assert!(
            e.to_string().contains("pull secret olmv1-system/pull")
                && e.to_string().contains("Opaque"),
            "{e}"
        );
    }

    /// Regression: serde's messages quote values, so a malformed pull secret used to put
    /// its content (a password, a token) into the error, hence into logs and conditions.
    #[test]
    fn errors_never_quote_secret_content() {
        for json in [
            br#"{"auths":{"r":"hunter2-secret"}}"#.as_slice(),
            br#"{"auths":{"r":{"username":"u","password":["hunter2-secret"]}}}"#,
            br#"{"auths":{"r":{"auth":{"hunter2-secret":1}}}}"#,
            br#"{"auths":"hunter2-secret"}"#,
            br#"{"auths":{"r":{"password":hunter2-secret}}}"#,
            br#"{"auths":{"r":{"password":"hunter2-secret"#,
        ] {
            let e = DockerConfig::parse("ps", json).unwrap_err().to_string();
            assert!(!e.contains("hunter2"), "{e}");
            assert!(e.contains("pull secret ps") && e.contains("line 1"), "{e}");
        }
        use k8s_openapi::ByteString;
        use k8s_openapi::api::core::v1::Secret;
        let s = Secret {
            data: Some(BTreeMap::from([(
                ".dockercfg".to_string(),
                ByteString(br#"{"r":{"auth":"dTpw"}, "x": hunter2-secret}"#.to_vec()),
            )])),
            ..Default::default()
        };
        let e = DockerConfig::from_secret(&s).unwrap_err().to_string();
        assert!(
            !e.contains("hunter2") && e.contains("invalid .dockercfg"),
            "{e}"
        );
    }

    #[test]
    fn first_entry_wins_after_merge() {
        let mut a = DockerConfig::default();
        a.insert(
            "r:1",
            Credentials {
                username: "a".into(),
                password: "1".into(),
            },
        );
        let mut b = DockerConfig::default();
        b.insert(
            "http://r:1/",
            Credentials {
                username: "b".into(),
                password: "2".into(),
            },
        );
        a.merge(&b);
        assert_eq!(a.credentials_for("R:1").unwrap().username, "a");
    }
}
