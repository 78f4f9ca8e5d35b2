//! `olmv1 status [NAME]`: the state of ClusterExtensions for a person, read from the
//! cluster of the current kubeconfig context (like kubectl: `--kubeconfig`,
//! `--context`, `KUBECONFIG`). This module is the I/O edge: it reads the extensions,
//! the ClusterCatalogs and the package's content they serve (through
//! [`super::cluster_content`]: `status.urls.base`, or the API server's service proxy
//! when that in-cluster URL does not answer from here), and the extensions' Events; [`report`] decides everything and
//! [`render`] prints the table or the detailed view.

pub mod render;
pub mod report;

use crate::api::{ClusterCatalog, ClusterExtension};
use crate::content::{CatalogContent, ContentClient, ContentConfig};
use crate::fbc::model::PackageContent;
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ListParams};
use report::{EventView, ExtensionReport};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

/// How many Events the detailed view shows.
const EVENTS_SHOWN: usize = 8;

#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    /// The ClusterExtension to describe (none: a table of all of them).
    pub name: Option<String>,
    /// Output format: table (text), json or yaml (the structure is documented in docs/reference/commands.md).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Table)]
    pub output: Output,
    /// For each bundle newer than the installed one, say why it is or is not taken
    /// (version range, channel, not a successor, deprecated, blocked).
    #[arg(long)]
    pub explain: bool,
    /// Kubeconfig file (default: KUBECONFIG, then ~/.kube/config).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use (default: the current context).
    #[arg(long)]
    pub context: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
    Yaml,
}

/// Why `status` could not run.
#[derive(Debug, thiserror::Error)]
pub enum StatusError {
    #[error("kubeconfig: {0} (pass --kubeconfig or set KUBECONFIG)")]
    Kubeconfig(String),
    #[error("clusterextension {0:?} not found (`olmv1 status` lists them all)")]
    NotFound(String),
    #[error("reading ClusterExtensions: {0}")]
    Api(String),
    #[error("printing: {0}")]
    Output(String),
}

pub fn run(args: StatusArgs) -> ExitCode {
    super::exit_with(super::block_on(run_async(&args)), |out| print!("{out}"))
}

async fn run_async(args: &StatusArgs) -> Result<String, StatusError> {
    let client = kube_client(args.kubeconfig.as_deref(), args.context.as_deref()).await?;
    let extensions: Api<ClusterExtension> = Api::all(client.clone());
    let list = match &args.name {
        Some(name) => vec![
            extensions
                .get_opt(name)
                .await
                .map_err(|e| StatusError::Api(e.to_string()))?
                .ok_or_else(|| StatusError::NotFound(name.clone()))?,
        ],
        None => {
            let mut items = extensions
                .list(&ListParams::default())
                .await
                .map_err(|e| StatusError::Api(e.to_string()))?
                .items;
            items.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
            items
        }
    };
    let catalogs: Result<Vec<ClusterCatalog>, String> = Api::<ClusterCatalog>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .map_err(|e| format!("listing ClusterCatalogs: {e}"));
    let content = ContentClient::new(ContentConfig::default())
        .map_err(|e| StatusError::Api(e.to_string()))?;
    let mut per_package: HashMap<String, Result<Vec<CatalogContent>, String>> = HashMap::new();
    let mut reports = Vec::with_capacity(list.len());
    for ext in &list {
        let package = ext
            .spec
            .source
            .catalog
            .as_ref()
            .map(|c| c.package_name.clone())
            .unwrap_or_default();
        if !per_package.contains_key(&package) {
            let contents = match &catalogs {
                Ok(cats) => Ok(package_contents(&content, &client, cats, &package).await),
                Err(e) => Err(e.clone()),
            };
            per_package.insert(package.clone(), contents);
        }
        let events = if args.name.is_some() {
            events_of(&client, ext).await
        } else {
            Vec::new()
        };
        let contents = per_package
            .get(&package)
            .cloned()
            .unwrap_or_else(|| Ok(Vec::new()));
        reports.push(report::build(ext, &contents, events));
    }
    format_output(args, &reports)
}

fn format_output(args: &StatusArgs, reports: &[ExtensionReport]) -> Result<String, StatusError> {
    let out = |e: String| StatusError::Output(e);
    match (args.output, args.name.is_some()) {
        (Output::Table, true) => Ok(reports
            .iter()
            .map(|r| render::detail(r, args.explain))
            .collect()),
        (Output::Table, false) => Ok(render::table(reports)),
        (Output::Json, true) => serde_json::to_string_pretty(&reports[0])
            .map(|s| s + "\n")
            .map_err(|e| out(e.to_string())),
        (Output::Json, false) => {
            serde_json::to_string_pretty(&serde_json::json!({ "items": reports }))
                .map(|s| s + "\n")
                .map_err(|e| out(e.to_string()))
        }
        (Output::Yaml, true) => {
            serde_saphyr::to_string(&reports[0]).map_err(|e| out(e.to_string()))
        }
        (Output::Yaml, false) => serde_saphyr::to_string(&serde_json::json!({ "items": reports }))
            .map_err(|e| out(e.to_string())),
    }
}

/// The kube client for the current (or `--context`) context of the kubeconfig
/// (`--kubeconfig`, else KUBECONFIG, else ~/.kube/config).
pub(crate) async fn kube_client(
    kubeconfig: Option<&std::path::Path>,
    context: Option<&str>,
) -> Result<kube::Client, StatusError> {
    let err = |e: String| StatusError::Kubeconfig(e);
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path)
                .map_err(|e| err(format!("reading {}: {e}", path.display())))?;
            kube::Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| err(format!("{}: {e}", path.display())))?
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options)
            .await
            .map_err(|e| err(e.to_string()))?,
        None => kube::Config::infer()
            .await
            .map_err(|e| err(e.to_string()))?,
    };
    kube::Client::try_from(config).map_err(|e| err(format!("creating the client: {e}")))
}

/// The package's content in every catalog, in list order (`Err` per catalog that
/// could not be read; empty for `Unavailable` catalogs).
async fn package_contents(
    content: &ContentClient,
    kube: &kube::Client,
    catalogs: &[ClusterCatalog],
    package: &str,
) -> Vec<CatalogContent> {
    let mut out = Vec::with_capacity(catalogs.len());
    for c in catalogs {
        let availability = c.spec.availability_mode;
        let data = if availability == crate::api::AvailabilityMode::Available {
            super::cluster_content::package(content, kube, c, package)
                .await
                .map_err(|e| e.to_string())
        } else {
            Ok(Arc::new(PackageContent::default()))
        };
        out.push(CatalogContent {
            name: c.metadata.name.clone().unwrap_or_default(),
            priority: c.spec.priority,
            availability,
            labels: c.metadata.labels.clone().unwrap_or_default(),
            content: data,
        });
    }
    out
}

/// The extension's Events (core/v1, any namespace: cluster-scoped objects' Events
/// live in `default`), the last [`EVENTS_SHOWN`], oldest first. Unreadable Events are
/// shown as none (the rest of the report is still worth printing).
async fn events_of(kube: &kube::Client, ext: &ClusterExtension) -> Vec<EventView> {
    let name = ext.metadata.name.clone().unwrap_or_default();
    let api: Api<Event> = Api::all(kube.clone());
    let params = ListParams::default().fields(&format!(
        "involvedObject.kind=ClusterExtension,involvedObject.name={name}"
    ));
    let Ok(list) = api.list(&params).await else {
        return Vec::new();
    };
    let mut events: Vec<EventView> = list
        .items
        .into_iter()
        .filter(|e| e.involved_object.uid.is_none() || e.involved_object.uid == ext.metadata.uid)
        .map(|e| {
            let last_seen = e
                .series
                .as_ref()
                .and_then(|s| s.last_observed_time.as_ref().map(|t| t.0.to_string()))
                .or_else(|| e.last_timestamp.as_ref().map(|t| t.0.to_string()))
                .or_else(|| e.event_time.as_ref().map(|t| t.0.to_string()))
                .or_else(|| {
                    e.metadata
                        .creation_timestamp
                        .as_ref()
                        .map(|t| t.0.to_string())
                })
                .unwrap_or_default();
            EventView {
                last_seen,
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                message: e.message.unwrap_or_default(),
                count: e
                    .series
                    .as_ref()
                    .and_then(|s| s.count)
                    .or(e.count)
                    .unwrap_or(1),
            }
        })
        .collect();
    events.sort_by(|a, b| a.last_seen.cmp(&b.last_seen));
    let skip = events.len().saturating_sub(EVENTS_SHOWN);
    events.split_off(skip)
}
