//! The release manifest: one multi-document YAML (`dist/olmv1.yaml`) of everything
//! `config/` installs — namespace, CRDs, RBAC, ConfigMap, Deployment, Service, the
//! admission policy and its binding — so that `kubectl apply -f` of a single file
//! installs olmv1. Generated from `config/kustomization.yaml` (`olmv1-testenv release`),
//! optionally with the controller image pinned (`--image ref@sha256:…`, what
//! `hack/image.sh --release-manifest` passes). `config/` is a plain list of resources;
//! the generator implements exactly that part of kustomize (the files in order, the
//! `olmv1` image renamed as kustomize's `images:` would) and refuses a kustomization
//! using anything else, so the release manifest cannot silently differ from
//! `kubectl apply -k config/`. Deciding is pure ([`assemble`]); [`generate`] reads files.

use std::path::{Path, PathBuf};

/// The committed release manifest, relative to the project.
pub const COMMITTED: &str = "dist/olmv1.yaml";
/// The image name `config/manager/deployment.yaml` uses (kustomize `images: - name: olmv1`).
pub const IMAGE_NAME: &str = "olmv1";
/// The command that regenerates [`COMMITTED`].
pub const REGENERATE: &str =
    "cargo run --features testenv --bin olmv1-testenv -- release -o dist/olmv1.yaml";

#[derive(Debug, thiserror::Error)]
pub enum ReleaseError {
    #[error("{path}: {source}", path = .path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "config/kustomization.yaml: {0} (the release generator, src/testenv/release.rs, implements only a list of `resources` files: extend it or keep config/ a plain list)"
    )]
    Kustomization(String),
    #[error(
        "{file}: expected exactly one container `image: {IMAGE_NAME}[:tag]` to pin, found {found}"
    )]
    Image { file: String, found: usize },
    #[error("--image {0:?}: not an image reference (no spaces, not empty)")]
    BadImage(String),
    #[error("{file}: {message}")]
    Document { file: String, message: String },
}

/// The resource files `kustomization` lists, in order.
pub fn resources(kustomization: &str) -> Result<Vec<String>, ReleaseError> {
    let doc: serde_json::Value = serde_saphyr::from_str(kustomization)
        .map_err(|e| ReleaseError::Kustomization(e.to_string()))?;
    let map = doc
        .as_object()
        .ok_or_else(|| ReleaseError::Kustomization("not a mapping".into()))?;
    for key in map.keys() {
        if !matches!(key.as_str(), "apiVersion" | "kind" | "resources") {
            return Err(ReleaseError::Kustomization(format!(
                "uses `{key}`, which the release generator does not implement"
            )));
        }
    }
    let list = map
        .get("resources")
        .and_then(|r| r.as_array())
        .ok_or_else(|| ReleaseError::Kustomization("no `resources` list".into()))?;
    list.iter()
        .map(|r| match r.as_str() {
            Some(s) if s.ends_with(".yaml") || s.ends_with(".yml") => Ok(s.to_string()),
            _ => Err(ReleaseError::Kustomization(format!(
                "resource {r} is not a YAML file (directories and remote bases are not implemented)"
            ))),
        })
        .collect()
}

/// Whether `line` is a container's `image: olmv1[:tag|@digest]` (not another image, not
/// a CRD schema property called `image`).
fn is_olmv1_image(line: &str) -> bool {
    let Some(value) = line.trim().strip_prefix("image:") else {
        return false;
    };
    let value = value.trim().trim_matches('"');
    value == IMAGE_NAME
        || value
            .strip_prefix(IMAGE_NAME)
            .is_some_and(|rest| rest.starts_with(':') || rest.starts_with('@'))
}

/// Renames the one `image: olmv1[:tag]` line of `text` to `image`, keeping its indent.
pub fn pin_image(file: &str, text: &str, image: &str) -> Result<String, ReleaseError> {
    if image.is_empty() || image.chars().any(char::is_whitespace) {
        return Err(ReleaseError::BadImage(image.to_string()));
    }
    let is_ours = is_olmv1_image;
    let found = text.lines().filter(|l| is_ours(l)).count();
    if found != 1 {
        return Err(ReleaseError::Image {
            file: file.to_string(),
            found,
        });
    }
    let mut out = String::with_capacity(text.len() + image.len());
    for line in text.split_inclusive('\n') {
        if is_ours(line) {
            let indent = &line[..line.len() - line.trim_start().len()];
            let newline = if line.ends_with('\n') { "\n" } else { "" };
            out.push_str(&format!("{indent}image: {image}{newline}"));
        } else {
            out.push_str(line);
        }
    }
    Ok(out)
}

/// The release manifest from the kustomization and the contents of its resources
/// (`(path relative to config/, text)`, in the kustomization's order).
pub fn assemble(files: &[(String, String)], image: Option<&str>) -> Result<String, ReleaseError> {
    let mut out = format!(
        "# olmv1 release manifest: everything config/ installs (namespace, CRDs, RBAC,\n\
         # Deployment, Service, ConfigMap, admission policy) in one file:\n\
         #   kubectl apply -f olmv1.yaml            (or: kubectl apply --server-side -f olmv1.yaml)\n\
         # Generated from config/ by `olmv1-testenv release` — do not edit; regenerate with\n\
         #   {REGENERATE}\n\
         # Controller image: {}\n",
        image.unwrap_or("as in config/ (olmv1:latest; pin one with `olmv1-testenv release --image <ref>@sha256:…`)")
    );
    let mut pinned = 0;
    for (file, text) in files {
        let text = match image {
            Some(image) if text.lines().any(is_olmv1_image) => {
                pinned += 1;
                pin_image(file, text, image)?
            }
            _ => text.clone(),
        };
        let body = text
            .strip_prefix("---\n")
            .unwrap_or(&text)
            .trim_end_matches('\n');
        if body.trim().is_empty() {
            return Err(ReleaseError::Document {
                file: file.clone(),
                message: "empty".into(),
            });
        }
        out.push_str(&format!("---\n# Source: config/{file}\n{body}\n"));
    }
    if image.is_some() && pinned != 1 {
        return Err(ReleaseError::Image {
            file: "config/".into(),
            found: pinned,
        });
    }
    Ok(out)
}

/// Reads `config_dir`'s kustomization and resources and assembles the manifest.
pub fn generate(config_dir: &Path, image: Option<&str>) -> Result<String, ReleaseError> {
    let read = |path: PathBuf| {
        std::fs::read_to_string(&path).map_err(|source| ReleaseError::Read { path, source })
    };
    let kustomization = read(config_dir.join("kustomization.yaml"))?;
    let mut files = Vec::new();
    for file in resources(&kustomization)? {
        let text = read(config_dir.join(&file))?;
        // Every document must be an object the API server accepts the shape of.
        super::manifests::parse_objects(&file, &text).map_err(|e| ReleaseError::Document {
            file: file.clone(),
            message: e.to_string(),
        })?;
        files.push((file, text));
    }
    assemble(&files, image)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_list_of_resource_files_is_accepted() {
        let ok = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- a.yaml\n- b/c.yaml\n";
        assert_eq!(resources(ok).expect("ok"), ["a.yaml", "b/c.yaml"]);
        let images = format!("{ok}images:\n- name: olmv1\n  newTag: v1\n");
        let err = resources(&images).expect_err("images");
        assert!(err.to_string().contains("uses `images`"), "{err}");
        let dir = "resources:\n- ../base\n";
        assert!(resources(dir).is_err());
    }

    #[test]
    fn the_olmv1_image_is_pinned_keeping_the_indent() {
        let text = "spec:\n  containers:\n  - name: manager\n    image: olmv1:latest\n    imagePullPolicy: IfNotPresent\n";
        let out = pin_image("d.yaml", text, "r.example/olmv1@sha256:abc").expect("pin");
        assert_eq!(
            out,
            "spec:\n  containers:\n  - name: manager\n    image: r.example/olmv1@sha256:abc\n    imagePullPolicy: IfNotPresent\n"
        );
        let other = "    image: busybox:1\n";
        assert!(matches!(
            pin_image("d.yaml", other, "x"),
            Err(ReleaseError::Image { found: 0, .. })
        ));
        assert!(matches!(
            pin_image("d.yaml", text, "has space"),
            Err(ReleaseError::BadImage(_))
        ));
        // `olmv1-other` is another image, not ours.
        assert!(pin_image("d.yaml", "image: olmv1-other:1\n", "x").is_err());
    }

    #[test]
    fn files_become_documents_in_order_with_their_source() {
        let files = vec![
            ("a.yaml".to_string(), "kind: A\n".to_string()),
            (
                "b.yaml".to_string(),
                "---\nkind: B\n---\nkind: C\n".to_string(),
            ),
        ];
        let out = assemble(&files, None).expect("assemble");
        assert!(
            out.ends_with("---\n# Source: config/a.yaml\nkind: A\n---\n# Source: config/b.yaml\nkind: B\n---\nkind: C\n"),
            "{out}"
        );
        assert!(out.contains(REGENERATE));
        // Pinning needs exactly one image line in all of config/.
        assert!(matches!(
            assemble(&files, Some("x@sha256:1")),
            Err(ReleaseError::Image { found: 0, .. })
        ));
    }
}
