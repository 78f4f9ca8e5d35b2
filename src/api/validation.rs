//! The regular expressions and CEL rules shared by the CRD schemas. The rule texts and
//! messages are upstream's, so that admission errors read the same on both projects.

/// DNS-1123 subdomain, as a CEL string literal body (backslashes doubled for CEL).
pub const DNS1123_SUBDOMAIN_CEL: &str =
    r#"self.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")"#;

/// DNS-1123 label.
pub const DNS1123_LABEL_CEL: &str = r#"self.matches("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")"#;

pub const DNS1123_SUBDOMAIN_MESSAGE: &str = "packageName must be a valid DNS1123 subdomain. It must contain only lowercase alphanumeric characters, hyphens (-) or periods (.), start and end with an alphanumeric character, and be no longer than 253 characters";

/// `spec.source.catalog.version`: upstream's regex, including its quirks (docs/concepts/resolution.md §4.3).
pub const VERSION_RANGE_CEL: &str = r#"self.matches("^(\\s*(=||!=|>|<|>=|=>|<=|=<|~|~>|\\^)\\s*(v?(0|[1-9]\\d*|[x|X|\\*])(\\.(0|[1-9]\\d*|x|X|\\*]))?(\\.(0|[1-9]\\d*|x|X|\\*))?(-([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?(\\+([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?)\\s*)((?:\\s+|,\\s*|\\s*\\|\\|\\s*)(=||!=|>|<|>=|=>|<=|=<|~|~>|\\^)\\s*(v?(0|[1-9]\\d*|x|X|\\*])(\\.(0|[1-9]\\d*|x|X|\\*))?(\\.(0|[1-9]\\d*|x|X|\\*]))?(-([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?(\\+([0-9A-Za-z\\-]+(\\.[0-9A-Za-z\\-]+)*))?)\\s*)*$")"#;

/// `status.install.bundle.version`.
pub const BUNDLE_VERSION_CEL: &str = r#"self.matches("^([0-9]+)(\\.[0-9]+)?(\\.[0-9]+)?(-([-0-9A-Za-z]+(\\.[-0-9A-Za-z]+)*))?(\\+([-0-9A-Za-z]+(-\\.[-0-9A-Za-z]+)*))?")"#;

/// `status.install.bundle.release`: dot-separated identifiers, numeric without leading
/// zeros or alphanumeric; may be empty.
pub const BUNDLE_RELEASE_CEL: &str = r#"self == '' || self.matches("^(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)(\\.(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*))*$")"#;

/// The image reference rules of ClusterCatalog `spec.source.image.ref` (rule, message).
pub const IMAGE_REF_RULES: &[(&str, &str)] = &[
    (
        r#"self.matches('^((([a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9\\-]*[a-zA-Z0-9])\\.)*([A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9\\-]*[A-Za-z0-9]))(:[0-9]+)?/')"#,
        r#"must start with a valid domain. valid domains must be alphanumeric characters (lowercase and uppercase) separated by the "." character."#,
    ),
    (
        r#"self.find('(\\/[a-z0-9]+((([._]|__|[-]*)[a-z0-9]+)+)?((\\/[a-z0-9]+((([._]|__|[-]*)[a-z0-9]+)+)?)+)?)') != """#,
        r#"a valid name is required. valid names must contain lowercase alphanumeric characters separated only by the ".", "_", "__", "-" characters."#,
    ),
    (
        r#"self.find('(@.*:)') != "" || self.find(':.*$') != """#,
        "must end with a digest or a tag",
    ),
    (
        r#"self.find('(@.*:)') == "" ? (self.find(':.*$') != "" ? self.find(':.*$').substring(1).size() <= 127 : true) : true"#,
        "tag is invalid. the tag must not be more than 127 characters",
    ),
    (
        r#"self.find('(@.*:)') == "" ? (self.find(':.*$') != "" ? self.find(':.*$').matches(':[\\w][\\w.-]*$') : true) : true"#,
        r#"tag is invalid. valid tags must begin with a word character (alphanumeric + "_") followed by word characters or ".", and "-" characters"#,
    ),
    (
        r#"self.find('(@.*:)') != "" ? self.find('(@.*:)').matches('(@[A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*[:])') : true"#,
        r#"digest algorithm is not valid. valid algorithms must start with an uppercase or lowercase alpha character followed by alphanumeric characters and may contain the "-", "_", "+", and "." characters."#,
    ),
    (
        r#"self.find('(@.*:)') != "" ? self.find(':.*$').substring(1).size() >= 32 : true"#,
        "digest is not valid. the encoded string must be at least 32 characters",
    ),
    (
        r#"self.find('(@.*:)') != "" ? self.find(':.*$').matches(':[0-9A-Fa-f]*$') : true"#,
        "digest is not valid. the encoded string must only contain hex characters (A-F, a-f, 0-9)",
    ),
];

/// Builds an `x-kubernetes-validations` list from (rule, message) pairs.
pub fn rules(pairs: &[(&str, &str)]) -> serde_json::Value {
    serde_json::Value::Array(
        pairs
            .iter()
            .map(|(rule, message)| serde_json::json!({ "rule": rule, "message": message }))
            .collect(),
    )
}
