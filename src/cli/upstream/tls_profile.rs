//! Upstream's `--tls-profile` and its custom-profile flags (`--tls-custom-ciphers`,
//! `--tls-custom-curves`, `--tls-custom-version`), as operator-controller v1.11.0's
//! `internal/shared/util/tlsprofiles` defines them, mapped onto the TLS options every
//! server here uses ([`crate::server::tls::TlsOptions`], turned into rustls' versions,
//! suites and groups by [`crate::server::tls::policy`]). The profiles follow Mozilla's
//! Server Side TLS guidelines 6.0 (`modern`, `intermediate`) and 5.8 (`old`):
//!
//! * `modern`: TLS 1.3 only; its three suites; curves X25519MLKEM768, X25519,
//!   prime256v1, secp384r1.
//! * `intermediate` (the default): TLS 1.2 and 1.3; the TLS 1.3 suites and ECDHE with
//!   AES-GCM or ChaCha20-Poly1305; the same curves.
//! * `old`: upstream also allows TLS 1.0/1.1 and CBC, RSA key exchange and 3DES
//!   suites, which rustls does not implement: here it serves what `intermediate`
//!   serves, and says so at start.
//! * `custom`: the three custom flags; cipher names as Go's `crypto/tls` names them
//!   (IANA's), curves as upstream names them, version `TLSv1.0`…`TLSv1.3`
//!   (default `TLSv1.2`); empty lists mean the defaults. A name upstream knows that
//!   rustls cannot serve (a CBC suite, secp521r1, TLS 1.0) stops the start, naming it.
//!
//! The profile name is matched without regard to case, as upstream's lookup does.

use crate::server::tls::{MinVersion, TlsOptions};

/// The TLS 1.3 suites of Mozilla's profiles.
const TLS13_SUITES: [&str; 3] = [
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// The TLS 1.2 suites of Mozilla's intermediate profile.
const INTERMEDIATE_TLS12_SUITES: [&str; 6] = [
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
];

/// The curves of all of Mozilla's profiles, in their order.
const CURVES: [&str; 4] = ["X25519MLKEM768", "X25519", "prime256v1", "secp384r1"];

/// The TLS flags of upstream's two programs.
#[derive(Debug, Default, Clone)]
pub struct TlsFlags {
    pub profile: String,
    pub custom_ciphers: Vec<String>,
    pub custom_curves: Vec<String>,
    pub custom_version: String,
}

/// `--tls-custom-version` as the minimum version.
fn custom_version(value: &str) -> Result<MinVersion, String> {
    match value {
        "TLSv1.2" | "" => Ok(MinVersion::Tls12),
        "TLSv1.3" => Ok(MinVersion::Tls13),
        "TLSv1.0" | "TLSv1.1" => Err(format!(
            "--tls-custom-version {value} is not supported here (rustls does not implement TLS 1.0 and 1.1): use TLSv1.2 or TLSv1.3"
        )),
        other => Err(format!(
            "--tls-custom-version: unknown TLS version: {other:?} (one of TLSv1.0, TLSv1.1, TLSv1.2, TLSv1.3)"
        )),
    }
}

/// The options of a Mozilla profile with minimum `min`.
fn mozilla(min: MinVersion, tls12: &[&str]) -> TlsOptions {
    let names = |l: &[&str]| l.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    TlsOptions {
        min_version: min,
        cipher_suites: names(&[&TLS13_SUITES[..], tls12].concat()),
        groups: names(&CURVES),
    }
}

/// Checks the custom profile's names now, so that a name rustls cannot serve stops
/// the start with the flag's name.
fn custom(flags: &TlsFlags) -> Result<TlsOptions, String> {
    for name in &flags.custom_ciphers {
        crate::server::tls::cipher_suite(name).map_err(|e| format!("--tls-custom-ciphers: {e}"))?;
    }
    for name in &flags.custom_curves {
        crate::server::tls::kx_group(name).map_err(|e| format!("--tls-custom-curves: {e}"))?;
    }
    let options = TlsOptions {
        min_version: custom_version(&flags.custom_version)?,
        cipher_suites: flags.custom_ciphers.clone(),
        groups: flags.custom_curves.clone(),
    };
    crate::server::tls::validate(&options).map_err(|e| format!("--tls-profile=custom: {e}"))?;
    Ok(options)
}

/// The TLS options of `flags`, and the lines to log at start (what `old` cannot
/// serve; custom flags given with another profile, which upstream ignores too).
pub fn options(flags: &TlsFlags) -> Result<(TlsOptions, Vec<String>), String> {
    let mut notes = Vec::new();
    let profile = flags.profile.to_ascii_lowercase();
    let options = match profile.as_str() {
        "modern" => mozilla(MinVersion::Tls13, &[]),
        "intermediate" | "" => mozilla(MinVersion::Tls12, &INTERMEDIATE_TLS12_SUITES),
        "old" => {
            notes.push("--tls-profile=old: TLS 1.0 and 1.1 and the CBC, RSA key exchange and 3DES suites of upstream's old profile are not served (rustls does not implement them); TLS 1.2 and 1.3 with intermediate's suites are".into());
            mozilla(MinVersion::Tls12, &INTERMEDIATE_TLS12_SUITES)
        }
        "custom" => custom(flags)?,
        other => {
            return Err(format!(
                "--tls-profile: unknown TLS profile: {other:?} (one of custom, intermediate, modern, old)"
            ));
        }
    };
    let custom_given = !flags.custom_ciphers.is_empty()
        || !flags.custom_curves.is_empty()
        || !flags.custom_version.is_empty();
    if profile != "custom" && custom_given {
        notes.push(format!(
            "--tls-custom-ciphers, --tls-custom-curves and --tls-custom-version are ignored with --tls-profile={profile} (as upstream ignores them): they apply to --tls-profile=custom"
        ));
    }
    Ok((options, notes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::tls::policy;
    use rustls::{CipherSuite, NamedGroup};

    fn flags(profile: &str) -> TlsFlags {
        TlsFlags {
            profile: profile.into(),
            ..Default::default()
        }
    }

    fn suites(o: &TlsOptions) -> Vec<CipherSuite> {
        let p = policy(o).unwrap();
        p.suites.iter().map(|s| s.suite()).collect()
    }

    #[test]
    fn modern_is_tls13_only_with_mozillas_curves() {
        let (o, notes) = options(&flags("Modern")).unwrap();
        assert!(notes.is_empty());
        let p = policy(&o).unwrap();
        assert_eq!(p.versions, [&rustls::version::TLS13]);
        assert_eq!(p.suites.len(), 3);
        let groups: Vec<_> = p.groups.iter().map(|g| g.name()).collect();
        assert_eq!(
            groups,
            [
                NamedGroup::X25519MLKEM768,
                NamedGroup::X25519,
                NamedGroup::secp256r1,
                NamedGroup::secp384r1
            ]
        );
    }

    #[test]
    fn intermediate_and_old_serve_tls12_with_ecdhe_aead_suites() {
        for profile in ["intermediate", "", "old"] {
            let (o, notes) = options(&flags(profile)).unwrap();
            assert_eq!(notes.len(), usize::from(profile == "old"), "{profile}");
            let p = policy(&o).unwrap();
            assert_eq!(p.versions.len(), 2);
            let s = suites(&o);
            assert_eq!(s.len(), 9, "{profile}");
            assert!(s.contains(&CipherSuite::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256));
            assert_eq!(s[0], CipherSuite::TLS13_AES_128_GCM_SHA256);
        }
        assert!(options(&flags("old")).unwrap().1[0].contains("TLS 1.0 and 1.1"));
        let err = options(&flags("paranoid")).unwrap_err();
        assert!(err.contains("unknown TLS profile: \"paranoid\""), "{err}");
    }

    #[test]
    fn custom_takes_go_names_and_refuses_what_rustls_cannot_do() {
        let f = TlsFlags {
            profile: "custom".into(),
            custom_ciphers: vec!["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into()],
            custom_curves: vec!["secp256r1".into(), "X25519".into()],
            custom_version: "TLSv1.3".into(),
        };
        let (o, _) = options(&f).unwrap();
        let p = policy(&o).unwrap();
        assert_eq!(p.versions, [&rustls::version::TLS13]);
        assert_eq!(p.groups.len(), 2);
        // a TLS 1.2 suite named: the TLS 1.3 ones stay, as in Go
        assert_eq!(suites(&o).len(), 4);
        // empty custom flags: TLS 1.2 and up with the defaults
        let (o, _) = options(&flags("custom")).unwrap();
        assert_eq!(o.min_version, MinVersion::Tls12);
        assert!(o.cipher_suites.is_empty() && o.groups.is_empty());
        let refused = |f: TlsFlags| options(&f).unwrap_err();
        let err = refused(TlsFlags {
            custom_ciphers: vec!["TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA".into()],
            ..flags("custom")
        });
        assert!(err.starts_with("--tls-custom-ciphers: cipher suite TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA is not supported here"), "{err}");
        let err = refused(TlsFlags {
            custom_curves: vec!["secp521r1".into()],
            ..flags("custom")
        });
        assert!(
            err.starts_with("--tls-custom-curves: curve secp521r1"),
            "{err}"
        );
        let err = refused(TlsFlags {
            custom_version: "TLSv1.1".into(),
            ..flags("custom")
        });
        assert!(err.contains("TLSv1.1 is not supported here"), "{err}");
        assert!(
            refused(TlsFlags {
                custom_version: "1.2".into(),
                ..flags("custom")
            })
            .contains("unknown TLS version")
        );
        // only TLS 1.3 suites named with TLS 1.2 allowed: valid (TLS 1.2 clients find
        // no suite, as with Go)
        let only13 = TlsFlags {
            custom_ciphers: vec!["TLS_AES_256_GCM_SHA384".into()],
            ..flags("custom")
        };
        assert!(crate::server::tls::validate(&options(&only13).unwrap().0).is_ok());
    }

    #[test]
    fn custom_flags_with_another_profile_are_ignored_and_said() {
        let f = TlsFlags {
            profile: "modern".into(),
            custom_ciphers: vec!["TLS_RSA_WITH_RC4_128_SHA".into()],
            ..Default::default()
        };
        let (o, notes) = options(&f).unwrap();
        assert_eq!(o.min_version, MinVersion::Tls13);
        assert!(
            notes[0].contains("ignored with --tls-profile=modern"),
            "{notes:?}"
        );
    }
}
