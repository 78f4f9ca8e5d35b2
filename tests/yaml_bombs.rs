//! YAML alias bombs through every reader of outside input (docs/reference/api-and-status.md A8,
//! docs/reference/limits.md "YAML aliases"): the bundle loader, the catalog (FBC) walker, the
//! `crd-diff` CRD reader, and the `olmv1 render` / `olmv1 catalog` binaries. Each must refuse every bomb shape with a message naming the
//! file and the alias expansion, and parsing must stay within 16 MiB above the input's
//! size.
//!
//! Memory is measured without any `unsafe`: each measurement runs in a fresh child
//! process (this test binary again, filtered to [`child_entry`]), which reads its own
//! peak resident set (`VmHWM` in `/proc/self/status`) before and after the parse and
//! prints the difference.

use olmv1::testenv::yaml_bombs::{Bomb, write_bundle};
use std::path::Path;
use std::process::Command;
use std::time::Instant;

const CHILD_ENV: &str = "OLMV1_YAML_BOMB_CHILD";
/// The bound every reader is held to: parsing may cost the input's size plus this.
const HEADROOM_KIB: u64 = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reader {
    Bundle,
    Catalog,
    Crd,
}

impl Reader {
    const ALL: [Reader; 3] = [Reader::Bundle, Reader::Catalog, Reader::Crd];

    fn name(self) -> &'static str {
        match self {
            Reader::Bundle => "bundle",
            Reader::Catalog => "catalog",
            Reader::Crd => "crd",
        }
    }

    fn from_name(s: &str) -> Option<Reader> {
        Reader::ALL.into_iter().find(|r| r.name() == s)
    }

    /// Writes the hostile input for this reader under `dir`; returns its size in bytes.
    fn write_input(self, dir: &Path, bomb: Bomb) -> u64 {
        match self {
            Reader::Bundle => write_bundle(dir, "hostile", bomb).expect("write bundle"),
            Reader::Catalog => {
                std::fs::create_dir_all(dir.join("hostile")).expect("mkdir");
                std::fs::write(
                    dir.join("hostile/catalog.yaml"),
                    bomb.catalog_yaml("hostile"),
                )
                .expect("write catalog");
            }
            Reader::Crd => {
                std::fs::create_dir_all(dir).expect("mkdir");
                std::fs::write(dir.join("crd.yaml"), bomb.crd()).expect("write crd");
            }
        }
        dir_size(dir)
    }

    /// Reads the input under `dir` as the product does; the error message.
    fn read(self, dir: &Path) -> Result<(), String> {
        match self {
            Reader::Bundle => olmv1::bundle::load_dir(dir, &Default::default())
                .map(drop)
                .map_err(|e| e.to_string()),
            Reader::Catalog => olmv1::fbc::walk_catalog(dir, &Default::default(), &mut |_| Ok(()))
                .map(drop)
                .map_err(|e| e.to_string()),
            Reader::Crd => {
                let text = std::fs::read_to_string(dir.join("crd.yaml")).expect("read crd");
                olmv1::preflight::crd_safety::parse_crd(&text)
                    .map(drop)
                    .map_err(|e| format!("crd.yaml: {e}"))
            }
        }
    }

    /// The file name the error must mention.
    fn file(self) -> &'static str {
        match self {
            Reader::Bundle => "manifests/csv.yaml",
            Reader::Catalog => "catalog.yaml",
            Reader::Crd => "crd.yaml",
        }
    }
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).expect("read dir").flatten() {
        let path = entry.path();
        total += if path.is_dir() {
            dir_size(&path)
        } else {
            entry.metadata().map(|m| m.len()).unwrap_or(0)
        };
    }
    total
}

fn bomb_from_name(s: &str) -> Option<Bomb> {
    Bomb::ALL.into_iter().find(|b| format!("{b:?}") == s)
}

/// Peak resident set of this process so far (KiB).
fn own_peak_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The child side: does nothing unless [`CHILD_ENV`] names `reader:bomb:dir`.
#[test]
fn child_entry() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mut parts = spec.splitn(3, ':');
    let (Some(reader), Some(bomb), Some(dir)) = (parts.next(), parts.next(), parts.next()) else {
        panic!("bad {CHILD_ENV}: {spec}");
    };
    let reader = Reader::from_name(reader).expect("reader");
    let _ = bomb_from_name(bomb).expect("bomb");
    let before = own_peak_kib();
    let started = Instant::now();
    let result = reader.read(Path::new(dir));
    let elapsed = started.elapsed();
    let after = own_peak_kib();
    println!(
        "RESULT peak_delta_kib={} elapsed_us={} ok={}",
        after.saturating_sub(before),
        elapsed.as_micros(),
        result.is_ok()
    );
}

/// Runs [`child_entry`] in a fresh process; returns (peak growth KiB, elapsed µs, ok).
fn measure(reader: Reader, bomb: Bomb, dir: &Path) -> (u64, u64, bool) {
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(exe)
        .args([
            "--exact",
            "yaml_bombs::child_entry",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(
            CHILD_ENV,
            format!("{}:{bomb:?}:{}", reader.name(), dir.display()),
        )
        .output()
        .expect("run child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no RESULT line: {stdout}"));
    let field = |k: &str| -> &str {
        line.split(' ')
            .find_map(|f| f.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k} in {line}"))
    };
    (
        field("peak_delta_kib=").parse().expect("kib"),
        field("elapsed_us=").parse().expect("us"),
        field("ok=") == "true",
    )
}

#[test]
fn every_reader_refuses_every_bomb_naming_file_and_alias_expansion() {
    for reader in Reader::ALL {
        for bomb in Bomb::ALL {
            let dir = tempfile::tempdir().expect("tempdir");
            reader.write_input(dir.path(), bomb);
            let err = reader
                .read(dir.path())
                .expect_err(&format!("{reader:?} accepted {bomb:?}"));
            assert!(
                err.contains(reader.file()) && err.contains("alias expansion"),
                "{reader:?} {bomb:?}: {err}"
            );
        }
    }
}

#[test]
fn every_reader_refuses_every_bomb_within_16_mib_above_the_input() {
    for reader in Reader::ALL {
        for bomb in Bomb::ALL {
            let dir = tempfile::tempdir().expect("tempdir");
            let size_kib = reader.write_input(dir.path(), bomb).div_ceil(1024);
            let (peak, micros, ok) = measure(reader, bomb, dir.path());
            eprintln!("{reader:?} {bomb:?}: input {size_kib} KiB, peak +{peak} KiB, {micros} µs");
            assert!(!ok, "{reader:?} accepted {bomb:?}");
            assert!(
                peak <= size_kib + HEADROOM_KIB,
                "{reader:?} {bomb:?}: peak grew by {peak} KiB for a {size_kib} KiB input"
            );
        }
    }
}

/// The largest legitimate use the budget allows (a 20,000-item anchored list aliased
/// once) still loads, within the same memory bound.
#[test]
fn the_largest_accepted_aliasing_stays_within_the_bound() {
    let dir = tempfile::tempdir().expect("tempdir");
    write_bundle(dir.path(), "fine", Bomb::Laughs).expect("bundle");
    let items = vec!["x"; 20_000].join(", ");
    let csv = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: fine.v1.0.0\nspec:\n  a: &a [{items}]\n  b: *a\n"
    );
    std::fs::write(dir.path().join("manifests/csv.yaml"), csv).expect("csv");
    Reader::Bundle.read(dir.path()).expect("accepted");
    let size_kib = dir_size(dir.path()).div_ceil(1024);
    let (peak, micros, ok) = measure(Reader::Bundle, Bomb::Laughs, dir.path());
    eprintln!("accepted aliasing: input {size_kib} KiB, peak +{peak} KiB, {micros} µs");
    assert!(ok);
    assert!(peak <= size_kib + HEADROOM_KIB, "peak grew by {peak} KiB");
}

#[test]
fn the_binaries_refuse_bomb_bundles_catalogs_and_config_files() {
    let bin = env!("CARGO_BIN_EXE_olmv1");
    let dir = tempfile::tempdir().expect("tempdir");
    let bundle = dir.path().join("bundle");
    write_bundle(&bundle, "hostile", Bomb::Laughs).expect("bundle");
    let out = Command::new(bin)
        .arg("render")
        .arg(&bundle)
        .args(["--namespace", "x"])
        .output()
        .expect("render");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("manifests/csv.yaml") && stderr.contains("alias expansion"),
        "{stderr}"
    );

    let catalog = dir.path().join("catalog");
    Reader::Catalog.write_input(&catalog, Bomb::Laughs);
    let out = Command::new(bin)
        .args(["catalog", "packages", "--catalog"])
        .arg(&catalog)
        .output()
        .expect("catalog");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("catalog.yaml") && stderr.contains("alias expansion"),
        "{stderr}"
    );

    // `render --config` reads a user file with the same reader.
    let good = dir.path().join("good");
    olmv1::testenv::demo::write_bundle_dir(
        &olmv1::testenv::demo::BundleSpec::new("fine", "1.0.0"),
        &good,
    )
    .expect("bundle");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, Bomb::Flow.fragment(0)).expect("config");
    let out = Command::new(bin)
        .arg("render")
        .arg(&good)
        .args(["--namespace", "x", "--config"])
        .arg(&config)
        .output()
        .expect("render --config");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("config.yaml") && stderr.contains("alias expansion"),
        "{stderr}"
    );
}
