//! Every fuzz target (`olmv1::fuzzing`, the bodies of `fuzz/fuzz_targets/*.rs`) run
//! un-instrumented in the test command: each seed under `fuzz/seeds/<target>/`, each
//! regression input under `fuzz/regressions/<target>/` (inputs that once crashed or hung
//! a target), a few generated hostile tar layers for `unpack_layer`, then a time box of
//! simple mutations (bit flips, byte edits, truncations, duplications, splices of two
//! seeds, inserted tokens) from a small deterministic PRNG. An input fails the test when
//! the target panics or runs longer than [`PER_INPUT`]; the input is saved under
//! `target/tmp/fuzz-failures/` to be replayed and kept as a regression.
//!
//! `OLMV1_FUZZ_SECONDS` sets the mutation time box per target (default 2; 0 replays the
//! corpora only); `OLMV1_FUZZ_SEED` changes the PRNG seed (default fixed, so a run is
//! reproducible up to how many inputs fit in the time box). The coverage-guided long
//! runs are `hack/fuzz.sh [seconds]`.

use olmv1::testenv::registry::{LayerCompression, TarEntry, build_tar, compress_layer};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Longest an input may take (debug build, busy shared CI machine).
const PER_INPUT: Duration = Duration::from_secs(20);
/// Longest mutated input.
const MAX_LEN: usize = 64 << 10;
/// Tokens the mutator inserts: the separators of the targets' input formats and the
/// syntax their parsers branch on.
const TOKENS: &[&[u8]] = &[
    b"\n@@@\n",
    b"\n====\n",
    b"\n---\n",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b": ",
    b"- ",
    b"&a ",
    b"*a",
    b"<<: ",
    b"!!binary ",
    b"||",
    b" - ",
    b">=",
    b"<",
    b"~",
    b"^",
    b"x",
    b"@sha256:",
    b"/",
    b"..",
    b"\x00",
    b"\xff",
    b"%",
    b"?",
    b"&",
    b"=",
    b"Range: bytes=",
    b"If-None-Match: ",
    b"\"schema\":\"olm.bundle\"",
    b"\"properties\":[",
    b"apiVersion: ",
    b"kind: CustomResourceDefinition\n",
    b"type: object\n",
    b"9999999999999999999999",
];

/// xorshift64*: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next() % n as u64) as usize
        }
    }
}

fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// One to four random edits of `input`, sometimes spliced with `other`.
fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..=rng.below(4) {
        let len = out.len();
        match rng.below(9) {
            0 if len > 0 => {
                let i = rng.below(len);
                out[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                out[i] = [0u8, 0xff, 0x7f, b'0', b' ', b'\n', b'"', b'\\'][rng.below(8)];
            }
            2 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(64)).min(len);
                out.drain(start..end);
            }
            3 => {
                let at = rng.below(len + 1);
                let token = TOKENS[rng.below(TOKENS.len())];
                out.splice(at..at, token.iter().copied());
            }
            4 if len > 0 => {
                let start = rng.below(len);
                let end = (start + 1 + rng.below(256)).min(len);
                let chunk = out[start..end].to_vec();
                let at = rng.below(out.len() + 1);
                out.splice(at..at, chunk);
            }
            5 => out.truncate(rng.below(len + 1)),
            6 if !other.is_empty() => {
                let cut = rng.below(len + 1);
                let from = rng.below(other.len());
                out.truncate(cut);
                out.extend_from_slice(&other[from..]);
            }
            7 => {
                let at = rng.below(len + 1);
                let n = 1 + rng.below(8);
                let bytes: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
                out.splice(at..at, bytes);
            }
            _ if len > 1 => {
                // Swap two ranges' worth of bytes: reorders structure.
                let a = rng.below(len);
                let b = rng.below(len);
                out.swap(a, b);
            }
            _ => out.push(rng.next() as u8),
        }
    }
    out.truncate(MAX_LEN);
    out
}

fn files_in(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter(|e| e.path().is_file())
                .filter_map(|e| {
                    let data = std::fs::read(e.path()).ok()?;
                    Some((e.path().display().to_string(), data))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// Hostile little layers for `unpack_layer` (binary, so generated here as
/// `hack/fuzz.sh` generates them with tar(1)).
fn layer_seeds() -> Vec<(String, Vec<u8>)> {
    let files = BTreeMap::from([
        (
            "configs/pkg/catalog.json".to_string(),
            br#"{"schema":"olm.package","name":"pkg"}"#.to_vec(),
        ),
        ("other/file".to_string(), b"x".to_vec()),
        ("other/.wh.file".to_string(), Vec::new()),
        ("configs/.wh..wh..opq".to_string(), Vec::new()),
    ]);
    let link = |path: &str, target: &str| TarEntry::Symlink {
        path: path.into(),
        target: target.into(),
    };
    let hostile = vec![
        link("configs/inside-link", "../other/file"),
        link("configs/outside-link", "../../../etc/passwd"),
        TarEntry::HardLink {
            path: "configs/hardlink".into(),
            target: "other/file".into(),
        },
        TarEntry::File {
            path: "../escape".into(),
            data: b"out".to_vec(),
        },
        TarEntry::File {
            path: "/abs".into(),
            data: b"abs".to_vec(),
        },
        link("configs/dir-link", "/tmp"),
        TarEntry::File {
            path: "configs/dir-link/through".into(),
            data: b"through".to_vec(),
        },
        TarEntry::CharDevice {
            path: "configs/dev".into(),
        },
        TarEntry::Fifo {
            path: "configs/fifo".into(),
        },
    ];
    let mut out = Vec::new();
    for (name, entries) in [("plain", Vec::new()), ("hostile", hostile)] {
        let Ok(tar) = build_tar(&files, &entries) else {
            panic!("building the {name} seed layer");
        };
        for c in [
            LayerCompression::None,
            LayerCompression::Gzip,
            LayerCompression::Zstd,
        ] {
            let Ok((bytes, _)) = compress_layer(&tar, c) else {
                panic!("compressing the {name} seed layer");
            };
            out.push((format!("generated {name} {c:?}"), bytes));
        }
    }
    out
}

/// Writes a failing input where it can be replayed; returns the path.
fn save_failure(target: &str, input: &[u8]) -> PathBuf {
    let dir = crate::support::tmp_dir().join("fuzz-failures");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!(
        "{target}-{:016x}",
        fnv(&String::from_utf8_lossy(input))
    ));
    let _ = std::fs::write(&path, input);
    path
}

/// What one target did.
struct Run {
    target: &'static str,
    corpus: usize,
    executions: u64,
    seconds: f64,
}

/// Runs `body` over the corpus, then mutations until `budget` is spent, on a worker
/// thread watched for hangs. Panics naming the failing input.
fn run_target(target: &'static str, body: fn(&[u8]), budget: Duration, seed: u64) -> Run {
    let project = olmv1::testenv::project_dir();
    let mut corpus = files_in(&project.join("fuzz/seeds").join(target));
    corpus.extend(files_in(&project.join("fuzz/regressions").join(target)));
    if target == "unpack_layer" {
        corpus.extend(layer_seeds());
    }
    corpus.push(("empty".into(), Vec::new()));
    let corpus_len = corpus.len();
    // The worker reports each input before running it; a panic or a missing report
    // within PER_INPUT names that input.
    let (tx, rx) = mpsc::channel::<Option<(String, Vec<u8>)>>();
    let worker = std::thread::Builder::new()
        .name(format!("fuzz-{target}"))
        .spawn(move || {
            let start = Instant::now();
            for (name, data) in &corpus {
                let _ = tx.send(Some((name.clone(), data.clone())));
                body(data);
            }
            let mut rng = Rng::new(seed ^ fnv(target));
            let mut n = 0u64;
            while start.elapsed() < budget {
                let a = &corpus[rng.below(corpus.len())].1;
                let b = &corpus[rng.below(corpus.len())].1;
                let input = mutate(&mut rng, a, b);
                let _ = tx.send(Some((format!("mutation {n}"), input.clone())));
                body(&input);
                n += 1;
            }
            let _ = tx.send(None);
        })
        .unwrap_or_else(|e| panic!("starting the {target} worker: {e}"));
    let start = Instant::now();
    let mut executions = 0u64;
    let mut current: Option<(String, Vec<u8>)> = None;
    loop {
        match rx.recv_timeout(PER_INPUT) {
            Ok(Some(input)) => {
                executions += 1;
                current = Some(input);
            }
            Ok(None) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let (name, data) = current.unwrap_or_default();
                let saved = save_failure(target, &data);
                panic!(
                    "{target}: input {name} ran longer than {PER_INPUT:?} (a hang); saved in {}",
                    saved.display()
                );
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                let (name, data) = current.unwrap_or_default();
                let saved = save_failure(target, &data);
                let _ = worker.join();
                panic!(
                    "{target}: input {name} panicked (see the panic above); saved in {}; \
                     replay: cargo fuzz run {target} {}",
                    saved.display(),
                    saved.display()
                );
            }
        }
    }
    let _ = worker.join();
    Run {
        target,
        corpus: corpus_len,
        executions,
        seconds: start.elapsed().as_secs_f64(),
    }
}

#[test]
fn every_fuzz_target_survives_its_corpus_and_mutations() {
    let seconds: u64 = std::env::var("OLMV1_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2);
    let seed: u64 = std::env::var("OLMV1_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x01f0_1f0a);
    // Every target named by the fuzz crate has a body here, and the other way round.
    let manifest = std::fs::read_to_string(olmv1::testenv::project_dir().join("fuzz/Cargo.toml"))
        .unwrap_or_else(|e| panic!("reading fuzz/Cargo.toml: {e}"));
    let declared: Vec<&str> = manifest
        .lines()
        .filter_map(|l| l.strip_prefix("name = \""))
        .filter_map(|l| l.strip_suffix('"'))
        .filter(|n| *n != "olmv1-fuzz")
        .collect();
    let mut names: Vec<&str> = olmv1::fuzzing::TARGETS.iter().map(|(n, _)| *n).collect();
    let mut declared_sorted = declared.clone();
    names.sort_unstable();
    declared_sorted.sort_unstable();
    assert_eq!(
        names, declared_sorted,
        "fuzz/Cargo.toml and olmv1::fuzzing::TARGETS differ"
    );

    // The targets one after the other: the machine is shared; the time box is per target.
    let mut runs = Vec::new();
    for (target, body) in olmv1::fuzzing::TARGETS {
        runs.push(run_target(
            target,
            *body,
            Duration::from_secs(seconds),
            seed,
        ));
    }
    olmv1::fuzzing::remove_scratch();
    eprintln!(
        "\n{:<16} {:>7} {:>11} {:>8} {:>9}",
        "target", "corpus", "executions", "seconds", "exec/s"
    );
    for r in &runs {
        eprintln!(
            "{:<16} {:>7} {:>11} {:>8.1} {:>9.0}",
            r.target,
            r.corpus,
            r.executions,
            r.seconds,
            r.executions as f64 / r.seconds.max(0.001)
        );
        assert!(
            r.executions >= r.corpus as u64,
            "{}: not every corpus input ran",
            r.target
        );
    }
}

#[test]
fn the_mutator_is_deterministic_and_bounded() {
    let seed = b"{\"schema\":\"olm.package\"}".to_vec();
    let run = |s: u64| {
        let mut rng = Rng::new(s);
        (0..200)
            .map(|_| mutate(&mut rng, &seed, b"other"))
            .collect::<Vec<_>>()
    };
    let (a, b) = (run(7), run(7));
    assert_eq!(a, b, "same seed, same mutations");
    assert_ne!(a, run(8), "another seed, other mutations");
    assert!(a.iter().any(|m| m != &seed), "mutations change the input");
    assert!(a.iter().all(|m| m.len() <= MAX_LEN));
}
