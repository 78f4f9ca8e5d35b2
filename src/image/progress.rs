//! Pull progress for a watching person: the puller reports, per downloaded chunk,
//! which layer of how many it is on and the bytes so far of the image's declared
//! total, to an optional [`ProgressSink`] in [`super::PullerConfig`]. The controller
//! sets none (one `Option` check per chunk); the CLI sets one that draws a status line
//! on a terminal (`cli/progress.rs`).

use std::sync::Arc;

/// Where a pull is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress<'a> {
    /// The image as asked for.
    pub image: &'a str,
    /// 1-based index of the layer being downloaded.
    pub layer: usize,
    pub layers: usize,
    /// Bytes of all layers downloaded so far.
    pub bytes: u64,
    /// The layers' declared total size.
    pub total_bytes: u64,
    /// Every layer is downloaded (the last report of a pull).
    pub finished: bool,
}

/// A callback receiving [`Progress`] reports; called from the pulling task, so it
/// must be quick (throttle drawing inside).
#[derive(Clone)]
pub struct ProgressSink(Arc<dyn Fn(&Progress<'_>) + Send + Sync>);

impl ProgressSink {
    pub fn new(f: impl Fn(&Progress<'_>) + Send + Sync + 'static) -> Self {
        ProgressSink(Arc::new(f))
    }

    pub fn report(&self, p: &Progress<'_>) {
        (self.0)(p)
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressSink")
    }
}

#[cfg(test)]
mod tests {
    mod with_registry {
        //! The pull progress tests that need a real `docker-registry` process;
        //! hack/test.sh runs them in the integration tier (by the `::with_registry::`
        //! path segment).

        use super::super::*;
        use crate::image::{DockerConfig, Extract, ImagePuller};
        use crate::testenv::registry::{
            LayerCompression, TestRegistry, build_tar, compress_layer, push_layers,
        };
        use std::collections::BTreeMap;
        use std::sync::Mutex;

        /// A two-layer image pulled with a sink: every report names 2 layers and the
        /// declared total, bytes only grow, the last report is `finished` with every byte;
        /// a second pull of the same digest (a cache hit) reports nothing.
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn a_pull_reports_layers_and_bytes() {
            let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
            let reg = TestRegistry::start().expect("registry");
            let big: Vec<u8> = (0..300_000u32).flat_map(|i| i.to_le_bytes()).collect();
            let files = |name: &str, data: &[u8]| {
                BTreeMap::from([(format!("configs/{name}"), data.to_vec())])
            };
            let layers = vec![
                compress_layer(
                    &build_tar(&files("a.bin", &big), &[]).expect("tar"),
                    LayerCompression::None,
                )
                .expect("layer"),
                compress_layer(
                    &build_tar(&files("b.json", b"{}"), &[]).expect("tar"),
                    LayerCompression::Gzip,
                )
                .expect("layer"),
            ];
            let labels = BTreeMap::from([(
                crate::image::CATALOG_CONFIGS_LABEL.to_string(),
                "/configs".to_string(),
            )]);
            let pushed = push_layers(&reg, "progress/two:v1", layers, &labels)
                .await
                .expect("push");
            /// (layer, layers, bytes, total bytes, finished)
            type Seen = Vec<(usize, usize, u64, u64, bool)>;
            let log: std::sync::Arc<Mutex<Seen>> = Default::default();
            let record = log.clone();
            let dir = tempfile::tempdir().expect("tempdir");
            let mut config = reg.puller_config(dir.path());
            config.progress = Some(ProgressSink::new(move |p| {
                record.lock().unwrap().push((
                    p.layer,
                    p.layers,
                    p.bytes,
                    p.total_bytes,
                    p.finished,
                ));
            }));
            let puller = ImagePuller::new(config).expect("puller");
            puller
                .pull(
                    &pushed.reference,
                    &Extract::CatalogConfigs,
                    &DockerConfig::default(),
                )
                .await
                .expect("pull");
            let seen = log.lock().unwrap().clone();
            assert!(seen.len() >= 3, "{seen:?}");
            let total = seen[0].3;
            assert!(total > 1_200_000, "declared total {total}");
            assert!(seen.iter().all(|s| s.1 == 2 && s.3 == total), "{seen:?}");
            assert!(
                seen.windows(2).all(|w| w[0].2 <= w[1].2),
                "bytes only grow: {seen:?}"
            );
            assert!(
                seen.iter().any(|s| s.0 == 1) && seen.iter().any(|s| s.0 == 2),
                "{seen:?}"
            );
            assert_eq!(seen.last().copied(), Some((2, 2, total, total, true)));
            assert_eq!(seen.iter().filter(|s| s.4).count(), 1);

            let before = seen.len();
            puller
                .pull(
                    &pushed.reference,
                    &Extract::CatalogConfigs,
                    &DockerConfig::default(),
                )
                .await
                .expect("cached pull");
            assert_eq!(
                log.lock().unwrap().len(),
                before,
                "a cache hit downloads nothing"
            );
        }
    }
}
