//! The watched CA directories (`--catalogd-cas-dir`, `--pull-cas-dir`), as upstream's
//! certificate pool watcher: every [`POLL`] the directory is read again; a changed set
//! of certificates replaces the trusted CAs of the content client or the image puller
//! without a restart, a directory that no longer reads (or a certificate that does not
//! parse) is logged once and the previous CAs are kept
//! (docs/how-to/switch-from-upstream.md). Reading a handful of small files every few
//! seconds costs nothing noticeable; the decision is [`State::step`].

use crate::controller::ControllerArgs;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often a watched directory is read again.
pub const POLL: Duration = Duration::from_secs(3);

/// What to do after a read of the directory.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing changed (or the same failure again: logged already).
    Keep,
    /// New CAs: install them.
    Apply(Option<Vec<u8>>),
    /// A new failure: log it, keep the previous CAs.
    Warn(String),
}

/// The CAs in use and the last failure of one directory.
#[derive(Debug, Default)]
pub struct State {
    applied: Option<Vec<u8>>,
    /// The last failure logged, and the CAs it rejected (if the read worked).
    failed: Option<(String, Option<Option<Vec<u8>>>)>,
}

impl State {
    /// The state of the CAs read at start.
    pub fn new(applied: Option<Vec<u8>>) -> Self {
        State {
            applied,
            failed: None,
        }
    }

    /// Decides on a new `read` of the directory.
    pub fn step(&mut self, read: Result<Option<Vec<u8>>, String>) -> Step {
        match read {
            Ok(pem) if pem == self.applied => {
                self.failed = None;
                Step::Keep
            }
            Ok(pem) => match &self.failed {
                Some((_, Some(rejected))) if *rejected == pem => Step::Keep,
                _ => Step::Apply(pem),
            },
            Err(e) => match &self.failed {
                Some((last, None)) if *last == e => Step::Keep,
                _ => {
                    self.failed = Some((e.clone(), None));
                    Step::Warn(e)
                }
            },
        }
    }

    /// The CAs of [`Step::Apply`] were installed.
    pub fn applied(&mut self, pem: Option<Vec<u8>>) {
        self.applied = pem;
        self.failed = None;
    }

    /// The CAs of [`Step::Apply`] were refused with `error` (logged): not tried again
    /// until the directory changes.
    pub fn rejected(&mut self, pem: Option<Vec<u8>>, error: String) {
        self.failed = Some((error, Some(pem)));
    }
}

type Read = Box<dyn Fn() -> Result<Option<Vec<u8>>, String> + Send + Sync>;
type Install = Box<dyn Fn(Option<Vec<u8>>) -> Result<(), String> + Send + Sync>;

/// One watched directory: how to read its CAs and where to install them.
pub struct Watched {
    pub flag: &'static str,
    pub dir: PathBuf,
    pub read: Read,
    pub install: Install,
    pub state: State,
}

/// Polls every directory of `watched` until the process ends (never returns; pending
/// when there is none).
pub async fn run(mut watched: Vec<Watched>) {
    if watched.is_empty() {
        return std::future::pending().await;
    }
    for w in &watched {
        tracing::info!(flag = w.flag, dir = %w.dir.display(), "watching the CA directory");
    }
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        for w in &mut watched {
            poll_once(w);
        }
    }
}

fn poll_once(w: &mut Watched) {
    let dir = w.dir.display().to_string();
    match w.state.step((w.read)()) {
        Step::Keep => {}
        Step::Warn(error) => {
            tracing::warn!(flag = w.flag, %dir, %error, "cannot read the CA directory; keeping the CAs in use");
        }
        Step::Apply(pem) => match (w.install)(pem.clone()) {
            Ok(()) => {
                tracing::info!(flag = w.flag, %dir, "the CA directory changed; its CAs are trusted from now on");
                w.state.applied(pem);
            }
            Err(error) => {
                tracing::warn!(flag = w.flag, %dir, %error, "the CA directory changed but its CAs were refused; keeping the CAs in use");
                w.state.rejected(pem, error);
            }
        },
    }
}

/// The CAs trusted for registries at start and on every poll: `--ca-bundle`'s file
/// and the certificates of `--pull-cas-dir`.
pub fn pull_cas(args: &ControllerArgs) -> Result<Option<Vec<u8>>, crate::image::ImageError> {
    let mut config = crate::image::PullerConfig::new(PathBuf::new());
    if let Some(ca) = &args.ca_bundle {
        config = config.with_ca_bundle_file(ca)?;
    }
    if let Some(dir) = &args.pull_cas_dir {
        config = config.with_ca_dir(dir)?;
    }
    Ok(config.ca_bundle_pem)
}

/// The directories `args` names, watched for the image puller and the content client.
pub fn watched(
    args: &ControllerArgs,
    puller: Arc<crate::image::ImagePuller>,
    extension: Arc<crate::controller::extension::ExtensionContext>,
) -> Vec<Watched> {
    let mut out = Vec::new();
    if let Some(dir) = &args.pull_cas_dir {
        let args = args.clone();
        out.push(Watched {
            flag: "--pull-cas-dir",
            dir: dir.clone(),
            state: State::new(puller.config().ca_bundle_pem.clone()),
            read: Box::new(move || pull_cas(&args).map_err(|e| e.to_string())),
            install: Box::new(move |pem| puller.set_ca_bundle_pem(pem).map_err(|e| e.to_string())),
        });
    }
    if let Some(dir) = args
        .catalogd_cas_dir
        .clone()
        .filter(|_| args.role.runs_extensions())
    {
        let d = dir.clone();
        out.push(Watched {
            flag: "--catalogd-cas-dir",
            dir,
            state: State::new(extension.content.config().ca_bundle_pem.clone()),
            read: Box::new(move || {
                crate::content::read_cas_dir(&d)
                    .map(Some)
                    .map_err(|e| e.to_string())
            }),
            install: Box::new(move |pem| {
                extension
                    .content
                    .set_ca_bundle(pem.as_deref())
                    .map_err(|e| e.to_string())
            }),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pem(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn unchanged_directory_is_kept() {
        let mut s = State::new(pem("a"));
        assert_eq!(s.step(Ok(pem("a"))), Step::Keep);
        assert_eq!(s.step(Ok(pem("a"))), Step::Keep);
    }

    #[test]
    fn a_new_ca_is_applied_once() {
        let mut s = State::new(pem("a"));
        assert_eq!(s.step(Ok(pem("ab"))), Step::Apply(pem("ab")));
        s.applied(pem("ab"));
        assert_eq!(s.step(Ok(pem("ab"))), Step::Keep);
    }

    #[test]
    fn a_failure_is_logged_once_and_the_previous_cas_kept() {
        let mut s = State::new(pem("a"));
        assert_eq!(s.step(Err("bad".into())), Step::Warn("bad".into()));
        assert_eq!(s.step(Err("bad".into())), Step::Keep);
        assert_eq!(s.step(Err("worse".into())), Step::Warn("worse".into()));
        // fixed back to what is in use: nothing to install
        assert_eq!(s.step(Ok(pem("a"))), Step::Keep);
        assert_eq!(s.step(Err("bad".into())), Step::Warn("bad".into()));
    }

    #[test]
    fn refused_cas_are_not_tried_again_until_the_directory_changes() {
        let mut s = State::new(pem("a"));
        assert_eq!(s.step(Ok(pem("x"))), Step::Apply(pem("x")));
        s.rejected(pem("x"), "unparsable".into());
        assert_eq!(s.step(Ok(pem("x"))), Step::Keep);
        assert_eq!(s.step(Ok(pem("xy"))), Step::Apply(pem("xy")));
    }

    #[test]
    fn polling_installs_what_the_directory_holds() {
        use std::sync::{Arc, Mutex};
        let disk = Arc::new(Mutex::new(Ok(pem("a"))));
        let installed = Arc::new(Mutex::new(Vec::new()));
        let (d, i) = (disk.clone(), installed.clone());
        let mut watched = Watched {
            flag: "--test-cas-dir",
            dir: PathBuf::from("/cas"),
            read: Box::new(move || d.lock().map(|g| g.clone()).unwrap_or(Ok(None))),
            install: Box::new(move |p| {
                if p.as_deref() == Some(b"bad".as_slice()) {
                    return Err("unparsable".into());
                }
                i.lock().map_err(|e| e.to_string())?.push(p);
                Ok(())
            }),
            state: State::new(pem("a")),
        };
        let mut set = |v: Result<Option<Vec<u8>>, String>| {
            *disk.lock().unwrap() = v;
            poll_once(&mut watched);
            poll_once(&mut watched);
        };
        set(Ok(pem("a")));
        set(Err("gone".into()));
        set(Ok(pem("bad")));
        set(Ok(pem("ab")));
        assert_eq!(*installed.lock().unwrap(), vec![pem("ab")]);
    }
}
