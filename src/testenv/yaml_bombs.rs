//! Hostile YAML for the tests of the bounded readers ([`crate::yaml`]): alias bombs of
//! several shapes, and the same bombs placed where an attacker who can publish to a
//! catalog would put them (a bundle's CSV annotations, a catalog file, a CRD file).

use std::fmt::Write as _;

/// The shapes of alias abuse the readers must refuse cheaply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bomb {
    /// "Billion laughs": ten levels, each a sequence of nine aliases of the previous one
    /// (9^10 ≈ 3.5 billion nodes from about 1 KB).
    Laughs,
    /// One anchored 64 KiB scalar, aliased 4,000 times (256 MiB of strings).
    Wide,
    /// Sixty levels of two aliases each (2^60 nodes): deep alias nesting, little width.
    Deep,
    /// Ten levels of mappings that merge (`<<`) the previous level and alias it eight times.
    MergeKeys,
    /// The laughs written entirely in flow style, anchors inside `[...]` and `{...}`.
    Flow,
    /// 200 nested anchored sequences around 2,000 scalars and no alias at all: the
    /// deserializer keeps a copy of every anchored node (200 × 2,000 copies).
    NestedAnchors,
}

impl Bomb {
    pub const ALL: [Bomb; 6] = [
        Bomb::Laughs,
        Bomb::Wide,
        Bomb::Deep,
        Bomb::MergeKeys,
        Bomb::Flow,
        Bomb::NestedAnchors,
    ];

    /// A YAML mapping fragment holding the bomb, every line indented by `indent` spaces
    /// (ends with a newline).
    pub fn fragment(self, indent: usize) -> String {
        let pad = " ".repeat(indent);
        let mut out = String::new();
        match self {
            Bomb::Laughs => {
                let _ = writeln!(out, "{pad}l0: &l0 lol");
                for level in 1..=10 {
                    let _ = writeln!(out, "{pad}l{level}: &l{level}");
                    for _ in 0..9 {
                        let _ = writeln!(out, "{pad}  - *l{}", level - 1);
                    }
                }
            }
            Bomb::Wide => {
                let _ = writeln!(out, "{pad}s: &s \"{}\"", "x".repeat(64 << 10));
                let refs = vec!["*s"; 4000].join(", ");
                let _ = writeln!(out, "{pad}refs: [{refs}]");
            }
            Bomb::Deep => {
                let _ = writeln!(out, "{pad}d0: &d0 [lol]");
                for level in 1..=60 {
                    let p = level - 1;
                    let _ = writeln!(out, "{pad}d{level}: &d{level} [*d{p}, *d{p}]");
                }
            }
            Bomb::MergeKeys => {
                let _ = writeln!(out, "{pad}m0: &m0 {{a: lol, b: lol}}");
                for level in 1..=10 {
                    let p = level - 1;
                    let _ = write!(out, "{pad}m{level}: &m{level} {{<<: *m{p}");
                    for k in 0..8 {
                        let _ = write!(out, ", k{k}: *m{p}");
                    }
                    let _ = writeln!(out, "}}");
                }
            }
            Bomb::Flow => {
                let _ = write!(out, "{pad}flow: {{l0: &f0 [lol, lol]");
                for level in 1..=10 {
                    let p = level - 1;
                    let refs = vec![format!("*f{p}"); 9].join(", ");
                    let _ = write!(out, ", l{level}: &f{level} [{refs}]");
                }
                let _ = writeln!(out, "}}");
            }
            Bomb::NestedAnchors => {
                let _ = write!(out, "{pad}nested: ");
                for level in 0..200 {
                    let _ = write!(out, "&n{level} [");
                }
                let _ = write!(out, "{}", vec!["x"; 2000].join(","));
                let _ = writeln!(out, "{}", "]".repeat(200));
            }
        }
        out
    }

    /// A ClusterServiceVersion whose `metadata.annotations` hold the bomb.
    pub fn csv(self, name: &str) -> String {
        format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: {name}\n  annotations:\n{}spec:\n  displayName: hostile\n  installModes:\n    - type: AllNamespaces\n      supported: true\n  install:\n    strategy: deployment\n    spec:\n      deployments: []\n",
            self.fragment(4)
        )
    }

    /// A YAML catalog file: an `olm.package` blob with the bomb in an extra key.
    pub fn catalog_yaml(self, package: &str) -> String {
        format!(
            "schema: olm.package\nname: {package}\nbomb:\n{}",
            self.fragment(2)
        )
    }

    /// A CustomResourceDefinition whose `metadata.annotations` hold the bomb.
    pub fn crd(self) -> String {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: widgets.example.com\n  annotations:\n{}spec:\n  group: example.com\n  names: {{kind: Widget, plural: widgets}}\n  scope: Namespaced\n  versions: []\n",
            self.fragment(4)
        )
    }
}

/// Writes a registry+v1 bundle directory (`manifests/`, `metadata/`) under `root` whose
/// CSV holds `bomb`.
pub fn write_bundle(root: &std::path::Path, package: &str, bomb: Bomb) -> std::io::Result<()> {
    std::fs::create_dir_all(root.join("manifests"))?;
    std::fs::create_dir_all(root.join("metadata"))?;
    std::fs::write(
        root.join("metadata/annotations.yaml"),
        format!(
            "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.package.v1: {package}\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n  operators.operatorframework.io.bundle.metadata.v1: metadata/\n"
        ),
    )?;
    std::fs::write(
        root.join("manifests/csv.yaml"),
        bomb.csv(&format!("{package}.v1.0.0")),
    )
}
