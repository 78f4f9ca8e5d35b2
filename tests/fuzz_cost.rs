//! Fuzzing for cost, not only crashes: each fuzz target body (`olmv1::fuzzing`) is run on
//! generated hostile families — inputs of one shape at a size `n` and at `4n` — and the
//! time and memory it takes must grow no faster than the input (with room for noise and
//! n·log n), and stay within an absolute bound per input byte. A quadratic path (every
//! entry re-checking every parent directory, branch lists compared pairwise, a rule
//! multiplied out) grows 16-fold from `n` to `4n` and fails here before it can stall the
//! controller (SECURITY.md, "Hostile input").
//!
//! Each measurement runs in a child process (this test binary, re-run with
//! `OLMV1_COST_CASE=<family>:<size>`), so that its peak RSS (`VmHWM`) is its own and a
//! crash (a stack overflow, an abort on allocation failure) fails one case with its name
//! instead of the whole binary.
//!
//! The children write their scratch files (`olmv1::fuzzing`'s, under `TMPDIR`) to
//! `/dev/shm` where it exists, since what is measured is the code, not the file system:
//! on ext4, creating a file right after many were deleted costs in proportion to the
//! deletions (the inode allocator, `find_inode_bit`, skips every recently deleted
//! inode: `recently_deleted` took 54 % of `unpack_layer/deep-tree`'s profile under
//! `perf`), so a family that unpacks, deletes and unpacks again grew quadratically on
//! disk — 88 ms, 305 ms, 916 ms for 200, 400 and 800 files, which failed a CI run — and
//! grows linearly on tmpfs. Time is the CPU time of the thread that runs the target
//! (`/proc/thread-self/schedstat`), not the wall clock, which also counts the CPU given
//! to other processes of a busy machine (a CI run measured 153 ms of wall clock for a
//! 475-byte input that takes 0.1 ms). Every family runs on the calling thread (none
//! spawns threads), so that thread's time is all of its work.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

/// How much faster than its input a family's time or memory may grow from `n` to `4n`:
/// linear is 1, n·log n a little more; a quadratic path over an input that grows 4-fold
/// grows 16-fold, 4 times faster than the input.
const MAX_EXCESS: f64 = 2.0;
/// Below this a CPU time is noise (caches, page faults of a first touch, the 4 ms
/// ticks some kernels account CPU time in).
const TIME_FLOOR: Duration = Duration::from_millis(60);
/// Below this a memory growth is noise (allocator arenas, lazily touched pages).
const MEMORY_FLOOR_KIB: u64 = 8 << 10;

/// A hostile family: a name, a generator of the input of size `n`, the fuzz target body
/// it is fed to, and the two sizes measured.
struct Family {
    name: &'static str,
    generate: fn(usize) -> Vec<u8>,
    target: fn(&[u8]),
    sizes: (usize, usize),
    /// Absolute bound on the memory one input may take: this much per input byte, plus
    /// [`MEMORY_FLOOR_KIB`].
    memory_per_byte: u64,
}

/// `n` files at the bottom of one chain of 50 directories (under the fuzz target's
/// depth limit of 64), as one tar layer. An unpacker that re-checks every parent of
/// every entry costs `n` × 50 lookups of up to 50 components each; one that compares
/// each entry with every earlier one (as opaque whiteouts once did) costs n².
fn deep_tree_layer(n: usize) -> Vec<u8> {
    let chain = vec!["d"; 50].join("/");
    let files: BTreeMap<String, Vec<u8>> = (0..n)
        .map(|i| (format!("{chain}/f{i}"), b"x".to_vec()))
        .collect();
    olmv1::testenv::registry::build_tar(&files, &[]).unwrap_or_default()
}

/// Two CRDs whose schema's `anyOf` lists differ in length: `n` branches live, `n + 1`
/// new (compared pairwise, that is n² branch comparisons).
fn any_of_crds(n: usize) -> Vec<u8> {
    let crd = |branches: usize| {
        let list: Vec<String> = (0..branches)
            .map(|i| format!(r#"{{"properties":{{"p{i}":{{"type":"string"}}}}}}"#))
            .collect();
        format!(
            r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"widgets.example.com"}},"spec":{{"group":"example.com","names":{{"kind":"Widget","plural":"widgets"}},"scope":"Namespaced","versions":[{{"name":"v1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{{"type":"object","anyOf":[{}]}}}}}}]}}}}"#,
            list.join(",")
        )
    };
    format!("{}\n====\n{}", crd(n), crd(n + 1)).into_bytes()
}

/// `n` bundles of one package, a line each (a catalog of many tiny blobs).
fn many_blobs(n: usize) -> Vec<u8> {
    let mut s =
        String::from("{\"schema\":\"olm.package\",\"name\":\"p\",\"defaultChannel\":\"c\"}\n");
    for i in 0..n {
        s.push_str(&format!(
            "{{\"schema\":\"olm.bundle\",\"package\":\"p\",\"name\":\"p.v0.0.{i}\",\"image\":\"r/p@sha256:{:064x}\",\"properties\":[{{\"type\":\"olm.package\",\"value\":{{\"packageName\":\"p\",\"version\":\"0.0.{i}\"}}}}]}}\n",
            i
        ));
    }
    s.into_bytes()
}

/// One ClusterRole whose one rule names `n` API groups, `n` resources and `n` verbs:
/// `n`³ permissions if multiplied out, from an input of a few bytes per name.
fn wide_rule(n: usize) -> Vec<u8> {
    let list = |prefix: &str| {
        (0..n)
            .map(|i| format!("\"{prefix}{i}\""))
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        r#"[{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{{"name":"wide"}},"rules":[{{"apiGroups":[{}],"resources":[{}],"verbs":[{}]}}]}}]"#,
        list("g"),
        list("r"),
        list("v")
    )
    .into_bytes()
}

/// One ClusterRole with `n` rules of one permission each.
fn many_rules(n: usize) -> Vec<u8> {
    let rules: Vec<String> = (0..n)
        .map(|i| format!(r#"{{"apiGroups":["g{i}"],"resources":["r{i}"],"verbs":["get"]}}"#))
        .collect();
    format!(
        r#"[{{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{{"name":"many"}},"rules":[{}]}}]"#,
        rules.join(",")
    )
    .into_bytes()
}

/// An `.indexignore` of `n` patterns, matched against 100 paths.
fn many_patterns(n: usize) -> Vec<u8> {
    let mut s = String::new();
    for i in 0..n {
        s.push_str(&format!("dir{i}/**/*.json\n"));
    }
    s.push_str("====\n");
    for i in 0..100 {
        s.push_str(&format!("pkg{i}/catalog.json\n"));
    }
    s.into_bytes()
}

fn families() -> Vec<Family> {
    vec![
        Family {
            name: "unpack_layer/deep-tree",
            generate: deep_tree_layer,
            target: olmv1::fuzzing::unpack_layer,
            // Under the fuzz target's 1,000 entries.
            sizes: (200, 800),
            memory_per_byte: 48,
        },
        Family {
            name: "crd_compare/any-of-lengths",
            generate: any_of_crds,
            // The comparison reads typed schemas (k8s-openapi's JSONSchemaProps, about
            // 2 KiB a node), bounded by crd_safety's MAX_SCHEMA_NODES.
            target: olmv1::fuzzing::crd_compare,
            sizes: (400, 1600),
            memory_per_byte: 256,
        },
        Family {
            name: "permissions/wide-rule",
            generate: wide_rule,
            target: olmv1::fuzzing::permissions,
            sizes: (20, 80),
            memory_per_byte: 64,
        },
        Family {
            name: "permissions/many-rules",
            generate: many_rules,
            target: olmv1::fuzzing::permissions,
            sizes: (2000, 8000),
            memory_per_byte: 64,
        },
        Family {
            name: "index_ignore/many-patterns",
            generate: many_patterns,
            target: olmv1::fuzzing::index_ignore,
            // Under the walk's limit of 1,000 patterns per file.
            sizes: (200, 800),
            memory_per_byte: 48,
        },
        Family {
            name: "fbc_parse/many-blobs",
            generate: many_blobs,
            target: olmv1::fuzzing::fbc_parse,
            sizes: (1000, 4000),
            memory_per_byte: 48,
        },
    ]
}

/// `VmHWM` and `VmRSS` of this process, KiB.
fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// CPU time of the calling thread so far (the first field of
/// `/proc/thread-self/schedstat`, in nanoseconds), or `None` where the kernel does not
/// keep it (then the wall clock is used).
fn thread_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let nanos: u64 = stat.split_whitespace().next()?.parse().ok()?;
    Some(Duration::from_nanos(nanos))
}

/// One measurement: what the child prints.
#[derive(Debug, Clone, Copy)]
struct Cost {
    input_bytes: usize,
    /// The least CPU time of three runs (the wall clock without schedstat).
    time: Duration,
    /// The shortest wall-clock time of the three runs (printed, not judged).
    wall: Duration,
    /// Peak RSS during the first run over the RSS before it.
    memory_kib: u64,
}

/// The child's side: runs the case named by `OLMV1_COST_CASE` and prints its cost.
/// Without the variable (a normal test run) it does nothing.
#[test]
fn cost_child() {
    let Ok(case) = std::env::var("OLMV1_COST_CASE") else {
        return;
    };
    let (name, size) = case.rsplit_once(':').expect("family:size");
    let size: usize = size.parse().expect("size");
    let family = families()
        .into_iter()
        .find(|f| f.name == name)
        .expect("known family");
    let input = (family.generate)(size);
    // What the target sets up once, whatever the input (lazy tables), is not the cost
    // of this input: a one-element input of the family first. Nor is the peak so far
    // (the binary's start, generating the input): reset to the current RSS ("5":
    // VmHWM, proc(5) clear_refs).
    (family.target)(&(family.generate)(1));
    olmv1::fuzzing::remove_scratch();
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let (_, rss_before) = memory_kib();
    let mut best = Duration::MAX;
    let mut best_wall = Duration::MAX;
    let mut memory_kib_after = 0;
    for run in 0..3 {
        let started = Instant::now();
        let cpu_before = thread_cpu_time();
        (family.target)(&input);
        let wall = started.elapsed();
        let cpu = thread_cpu_time()
            .zip(cpu_before)
            .map_or(wall, |(after, before)| after.saturating_sub(before));
        best = best.min(cpu);
        best_wall = best_wall.min(wall);
        if run == 0 {
            memory_kib_after = memory_kib().0;
        }
    }
    olmv1::fuzzing::remove_scratch();
    println!(
        "COST {} {} {} {}",
        input.len(),
        best.as_micros(),
        best_wall.as_micros(),
        memory_kib_after.saturating_sub(rss_before)
    );
}

/// `/dev/shm` when it is a directory (tmpfs on Linux): where the children's scratch
/// files go (see the module documentation).
fn memory_scratch() -> Option<&'static str> {
    std::path::Path::new("/dev/shm")
        .is_dir()
        .then_some("/dev/shm")
}

fn measure(family: &Family, size: usize) -> Result<Cost, String> {
    let out = Command::new(std::env::current_exe().map_err(|e| e.to_string())?)
        .args([
            "--exact",
            "fuzz_cost::cost_child",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env("OLMV1_COST_CASE", format!("{}:{size}", family.name))
        .envs(memory_scratch().map(|dir| ("TMPDIR", dir)))
        .output()
        .map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("COST ").map(|(_, cost)| cost))
        .ok_or_else(|| {
            format!(
                "{} at size {size} did not finish ({}): {}",
                family.name,
                out.status,
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .rev()
                    .take(8)
                    .collect::<Vec<_>>()
                    .join(" | ")
            )
        })?;
    let v: Vec<u64> = line
        .split_whitespace()
        .filter_map(|x| x.parse().ok())
        .collect();
    match v[..] {
        [input_bytes, micros, wall_micros, memory_kib] => Ok(Cost {
            input_bytes: input_bytes as usize,
            time: Duration::from_micros(micros),
            wall: Duration::from_micros(wall_micros),
            memory_kib,
        }),
        _ => Err(format!("unreadable cost line {line:?}")),
    }
}

/// Why `big` (the `4n` input) cost too much against `small`, if it did.
fn judge(family: &Family, small: Cost, big: Cost) -> Option<String> {
    let input = big.input_bytes as f64 / small.input_bytes.max(1) as f64;
    let growth = |a: f64, b: f64, floor: f64| b.max(floor) / a.max(floor) / input;
    let time = growth(
        small.time.as_secs_f64(),
        big.time.as_secs_f64(),
        TIME_FLOOR.as_secs_f64(),
    );
    let memory = growth(
        small.memory_kib as f64,
        big.memory_kib as f64,
        MEMORY_FLOOR_KIB as f64,
    );
    let bound_kib = MEMORY_FLOOR_KIB + family.memory_per_byte * big.input_bytes as u64 / 1024;
    let mut why = Vec::new();
    if time > MAX_EXCESS {
        why.push(format!(
            "CPU time grew {time:.1}x faster than the input ({:?} -> {:?}; wall {:?} -> {:?})",
            small.time, big.time, small.wall, big.wall
        ));
    }
    if memory > MAX_EXCESS {
        why.push(format!(
            "memory grew {memory:.1}x faster than the input ({} -> {} KiB)",
            small.memory_kib, big.memory_kib
        ));
    }
    if big.memory_kib > bound_kib {
        why.push(format!(
            "{} KiB for {} input bytes (bound {bound_kib} KiB)",
            big.memory_kib, big.input_bytes
        ));
    }
    (!why.is_empty()).then(|| {
        format!(
            "{} from {} to {} input bytes: {}",
            family.name,
            small.input_bytes,
            big.input_bytes,
            why.join("; ")
        )
    })
}

#[test]
fn every_hostile_family_costs_in_proportion_to_its_input() {
    if std::env::var_os("OLMV1_COST_CASE").is_some() {
        return;
    }
    let mut failures = Vec::new();
    for family in families() {
        let (small, big) = family.sizes;
        let costs = measure(&family, small).and_then(|s| Ok((s, measure(&family, big)?)));
        match costs {
            Ok((s, b)) => {
                eprintln!(
                    "{:<28} {:>8} B {:>9.1?} cpu {:>9.1?} wall {:>6} KiB | {:>8} B {:>9.1?} cpu {:>9.1?} wall {:>6} KiB",
                    family.name,
                    s.input_bytes,
                    s.time,
                    s.wall,
                    s.memory_kib,
                    b.input_bytes,
                    b.time,
                    b.wall,
                    b.memory_kib
                );
                // Even CPU time varies (caches, a first touch of pages): a growth over
                // the bound is measured once more before it counts.
                let verdict = judge(&family, s, b).and_then(|first| {
                    let again =
                        measure(&family, small).and_then(|s| Ok((s, measure(&family, big)?)));
                    match again {
                        Ok((s, b)) => judge(&family, s, b),
                        Err(e) => Some(format!("{first}; again: {e}")),
                    }
                });
                failures.extend(verdict);
            }
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
