//! Reproducible OCI images without a container engine (`hack/image.sh`,
//! `olmv1-testenv image`): one layer holding a program, the shared libraries it links
//! (as `ldd` lists them), a CA bundle and `/etc/passwd` with a non-root user; no shell.
//! The same inputs give the same digest: entries sorted, owners 0, times fixed to
//! `SOURCE_DATE_EPOCH` (0 when unset), gzip without a timestamp, JSON with a fixed
//! field order. The image is pushed to a registry or written as an OCI image layout
//! archive (`oci-archive`, what `skopeo`, `podman load` and `ctr import` read).

use anyhow::{Context, bail};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The non-root identity the images run as (distroless' `nonroot`).
pub const NONROOT_UID: u32 = 65532;

/// One file of the image's root filesystem.
#[derive(Clone, Debug)]
pub struct ImageFile {
    /// Path inside the image, without the leading `/`.
    pub path: String,
    pub data: Vec<u8>,
    pub mode: u32,
}

/// What the image runs and how.
#[derive(Clone, Debug, Default)]
pub struct RunConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub labels: BTreeMap<String, String>,
    /// `SOURCE_DATE_EPOCH`: every timestamp in the image.
    pub created: i64,
    /// Symbolic links `(path without the leading /, target)`: the program's other
    /// names (`/operator-controller`, `/catalogd` → `olmv1`).
    pub links: Vec<(String, String)>,
}

/// A built image: its blobs and the manifest naming them.
pub struct BuiltImage {
    pub layer: Vec<u8>,
    pub layer_digest: String,
    pub config: Vec<u8>,
    pub config_digest: String,
    pub manifest: Vec<u8>,
    pub manifest_digest: String,
}

pub fn sha256(data: &[u8]) -> String {
    format!(
        "sha256:{}",
        data_encoding::HEXLOWER.encode(&Sha256::digest(data))
    )
}

/// The files of a program's image: the program at `/<name>`, its shared libraries
/// (absent for static programs), the CA bundle and a passwd/group with `nonroot`.
pub fn program_files(program: &Path, name: &str) -> anyhow::Result<Vec<ImageFile>> {
    let data = std::fs::read(program).with_context(|| format!("reading {}", program.display()))?;
    let mut files = vec![ImageFile {
        path: name.to_string(),
        data,
        mode: 0o755,
    }];
    for lib in shared_libraries(program)? {
        let data = std::fs::read(&lib).with_context(|| format!("reading {}", lib.display()))?;
        let path = lib.to_string_lossy().trim_start_matches('/').to_string();
        files.push(ImageFile {
            path,
            data,
            mode: 0o755,
        });
    }
    let ca = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if ca.is_file() {
        files.push(ImageFile {
            path: "etc/ssl/certs/ca-certificates.crt".into(),
            data: std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?,
            mode: 0o644,
        });
    }
    files.push(ImageFile {
        path: "etc/passwd".into(),
        data: format!("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT_UID}:{NONROOT_UID}:nonroot:/home/nonroot:/sbin/nologin\n").into_bytes(),
        mode: 0o644,
    });
    files.push(ImageFile {
        path: "etc/group".into(),
        data: format!("root:x:0:\nnonroot:x:{NONROOT_UID}:\n").into_bytes(),
        mode: 0o644,
    });
    Ok(files)
}

/// The shared libraries `ldd` resolves for `program` (the loader included); empty
/// for a static program.
fn shared_libraries(program: &Path) -> anyhow::Result<Vec<PathBuf>> {
    let out = std::process::Command::new("ldd")
        .arg(program)
        .output()
        .context("running ldd to list the program's shared libraries")?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() || text.contains("not a dynamic executable") {
        return Ok(Vec::new());
    }
    let mut libs = Vec::new();
    for line in text.lines() {
        let path = match line.split_once("=>") {
            Some((_, rest)) => rest.split_whitespace().next(),
            None => line.split_whitespace().next(),
        };
        if let Some(p) = path.filter(|p| p.starts_with('/')) {
            libs.push(PathBuf::from(p));
        }
    }
    if text.contains("not found") {
        bail!(
            "{}: a shared library is missing:\n{text}",
            program.display()
        );
    }
    Ok(libs)
}

fn tar_layer(
    files: &[ImageFile],
    links: &[(String, String)],
    mtime: u64,
) -> anyhow::Result<Vec<u8>> {
    let mut sorted: Vec<&ImageFile> = files.iter().collect();
    sorted.sort_by(|a, b| a.path.cmp(&b.path));
    let mut dirs = std::collections::BTreeSet::new();
    for f in &sorted {
        let parts: Vec<&str> = f.path.split('/').collect();
        for i in 1..parts.len() {
            dirs.insert(parts[..i].join("/"));
        }
    }
    dirs.insert("tmp".into());
    let mut b = tar::Builder::new(Vec::new());
    b.mode(tar::HeaderMode::Deterministic);
    for d in &dirs {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(if d == "tmp" { 0o1777 } else { 0o755 });
        h.set_size(0);
        h.set_mtime(mtime);
        h.set_uid(0);
        h.set_gid(0);
        b.append_data(&mut h, format!("{d}/"), std::io::empty())?;
    }
    for f in sorted {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Regular);
        h.set_mode(f.mode);
        h.set_size(f.data.len() as u64);
        h.set_mtime(mtime);
        h.set_uid(0);
        h.set_gid(0);
        b.append_data(&mut h, &f.path, f.data.as_slice())?;
    }
    for (path, target) in links {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Symlink);
        h.set_mode(0o777);
        h.set_size(0);
        h.set_mtime(mtime);
        h.set_uid(0);
        h.set_gid(0);
        b.append_link(&mut h, path, target)?;
    }
    Ok(b.into_inner()?)
}

/// Builds the image (linux/amd64) from `files`, running as [`NONROOT_UID`].
pub fn build(files: &[ImageFile], run: &RunConfig) -> anyhow::Result<BuiltImage> {
    let mtime = u64::try_from(run.created).unwrap_or(0);
    let tar = tar_layer(files, &run.links, mtime)?;
    let diff_id = sha256(&tar);
    let mut gz = flate2::GzBuilder::new()
        .mtime(0)
        .write(Vec::new(), flate2::Compression::new(6));
    gz.write_all(&tar)?;
    let layer = gz.finish()?;
    let layer_digest = sha256(&layer);
    let created = jiff::Timestamp::from_second(run.created)
        .context("SOURCE_DATE_EPOCH out of range")?
        .to_string();
    let user = format!("{NONROOT_UID}:{NONROOT_UID}");
    let config = serde_json::to_vec(&serde_json::json!({
        "architecture": "amd64",
        "os": "linux",
        "created": created,
        "config": {
            "User": user,
            "Entrypoint": run.entrypoint,
            "Cmd": run.cmd,
            "Env": run.env,
            "WorkingDir": "/",
            "Labels": run.labels,
        },
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
        "history": [{"created": created, "created_by": "olmv1 hack/image.sh"}],
    }))?;
    let config_digest = sha256(&config);
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": layer_digest, "size": layer.len()}],
    }))?;
    let manifest_digest = sha256(&manifest);
    Ok(BuiltImage {
        layer,
        layer_digest,
        config,
        config_digest,
        manifest,
        manifest_digest,
    })
}

/// Pushes the image as `<host>/<repository>:<tag>` (plain HTTP when `insecure`);
/// returns the digest-pinned reference.
pub async fn push(image: &BuiltImage, reference: &str, insecure: bool) -> anyhow::Result<String> {
    use oci_client::client::{ClientConfig, ClientProtocol};
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    let r: oci_client::Reference = reference
        .parse()
        .with_context(|| format!("image reference {reference}"))?;
    let protocol = if insecure {
        ClientProtocol::HttpsExcept(vec![r.registry().to_string()])
    } else {
        ClientProtocol::Https
    };
    let client = oci_client::Client::new(ClientConfig {
        protocol,
        ..Default::default()
    });
    let auth = oci_client::secrets::RegistryAuth::Anonymous;
    client
        .store_auth_if_needed(r.resolve_registry(), &auth)
        .await;
    for (data, digest) in [
        (&image.layer, &image.layer_digest),
        (&image.config, &image.config_digest),
    ] {
        client
            .push_blob(&r, data.clone(), digest)
            .await
            .with_context(|| format!("pushing blob {digest} to {reference}"))?;
    }
    client
        .push_manifest_raw(
            &r,
            image.manifest.clone(),
            http::HeaderValue::from_static("application/vnd.oci.image.manifest.v1+json"),
        )
        .await
        .with_context(|| format!("pushing the manifest to {reference}"))?;
    Ok(format!(
        "{}/{}@{}",
        r.registry(),
        r.repository(),
        image.manifest_digest
    ))
}

/// Writes an OCI image layout as a tar archive, the manifest named `ref_name`.
pub fn write_oci_archive(image: &BuiltImage, path: &Path, ref_name: &str) -> anyhow::Result<()> {
    let index = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": image.manifest_digest, "size": image.manifest.len(),
            "annotations": {"org.opencontainers.image.ref.name": ref_name},
        }],
    }))?;
    let blob = |d: &str| format!("blobs/sha256/{}", d.trim_start_matches("sha256:"));
    let entries: Vec<(String, &[u8])> = vec![
        (
            "oci-layout".into(),
            br#"{"imageLayoutVersion":"1.0.0"}"#.as_slice(),
        ),
        ("index.json".into(), &index),
        (blob(&image.config_digest), &image.config),
        (blob(&image.layer_digest), &image.layer),
        (blob(&image.manifest_digest), &image.manifest),
    ];
    let file =
        std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
    let mut b = tar::Builder::new(std::io::BufWriter::new(file));
    b.mode(tar::HeaderMode::Deterministic);
    for dir in ["blobs/", "blobs/sha256/"] {
        let mut h = tar::Header::new_ustar();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        b.append_data(&mut h, dir, std::io::empty())?;
    }
    for (name, data) in entries {
        let mut h = tar::Header::new_ustar();
        h.set_mode(0o644);
        h.set_size(data.len() as u64);
        b.append_data(&mut h, name, data)?;
    }
    b.into_inner()?.flush()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn files() -> Vec<ImageFile> {
        vec![
            ImageFile {
                path: "bin/tool".into(),
                data: b"#!tool".to_vec(),
                mode: 0o755,
            },
            ImageFile {
                path: "etc/passwd".into(),
                data: b"root:x:0:0::/:/sbin/nologin\n".to_vec(),
                mode: 0o644,
            },
        ]
    }

    #[test]
    fn same_inputs_give_the_same_digest() {
        let run = RunConfig {
            entrypoint: vec!["/bin/tool".into()],
            created: 1_700_000_000,
            ..Default::default()
        };
        let a = build(&files(), &run).unwrap();
        let mut reversed = files();
        reversed.reverse();
        let b = build(&reversed, &run).unwrap();
        assert_eq!(a.manifest_digest, b.manifest_digest);
        let later = RunConfig {
            created: 1_700_000_001,
            ..run
        };
        assert_ne!(
            build(&files(), &later).unwrap().manifest_digest,
            a.manifest_digest
        );
    }

    #[test]
    fn the_config_runs_as_nonroot_and_names_the_layer() {
        let image = build(&files(), &RunConfig::default()).unwrap();
        let config: serde_json::Value = serde_json::from_slice(&image.config).unwrap();
        assert_eq!(config["config"]["User"], "65532:65532");
        let mut gz = flate2::read::GzDecoder::new(image.layer.as_slice());
        let mut tar = Vec::new();
        std::io::Read::read_to_end(&mut gz, &mut tar).unwrap();
        assert_eq!(config["rootfs"]["diff_ids"][0], sha256(&tar));
        let mut archive = tar::Archive::new(tar.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["bin/", "etc/", "tmp/", "bin/tool", "etc/passwd"]);
    }

    #[test]
    fn links_name_the_program_under_other_names() {
        let run = RunConfig {
            links: vec![("catalogd".into(), "bin/tool".into())],
            ..Default::default()
        };
        let image = build(&files(), &run).unwrap();
        let mut gz = flate2::read::GzDecoder::new(image.layer.as_slice());
        let mut tar = Vec::new();
        std::io::Read::read_to_end(&mut gz, &mut tar).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let link = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap())
            .find(|e| e.path().unwrap().display().to_string() == "catalogd")
            .expect("the link");
        assert_eq!(link.header().entry_type(), tar::EntryType::Symlink);
        assert_eq!(
            link.link_name().unwrap().unwrap().display().to_string(),
            "bin/tool"
        );
    }
}
