//! Key material for a loopback control plane: a CA, the API server's serving
//! certificate (127.0.0.1, localhost; and for a control plane with a node, the node's
//! host address and the `kubernetes` Service's ClusterIP and names, as in-cluster
//! clients dial them), and the ServiceAccount token signing key.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

/// Paths of the files written by [`generate`].
#[derive(Clone, Debug)]
pub struct Pki {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
    /// The CA certificate as PEM, for kubeconfigs.
    pub ca_pem: String,
}

/// Writes a fresh CA, serving certificate and ServiceAccount key pair under `dir`.
pub fn generate(dir: &Path) -> Result<Pki, super::TestEnvError> {
    let err = |what: &str, e: rcgen::Error| super::TestEnvError::Pki(format!("{what}: {e}"));
    std::fs::create_dir_all(dir).map_err(|e| super::TestEnvError::io(dir, e))?;

    let ca_key = KeyPair::generate().map_err(|e| err("CA key", e))?;
    let mut ca_params =
        CertificateParams::new(Vec::<String>::new()).map_err(|e| err("CA params", e))?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "olmv1-test-ca");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key_pem = ca_key.serialize_pem();
    let ca =
        CertifiedIssuer::self_signed(ca_params, ca_key).map_err(|e| err("CA certificate", e))?;

    let serving_key = KeyPair::generate().map_err(|e| err("serving key", e))?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_string(),
        "kubernetes".to_string(),
        "kubernetes.default".to_string(),
        "kubernetes.default.svc".to_string(),
        "kubernetes.default.svc.cluster.local".to_string(),
    ])
    .map_err(|e| err("serving params", e))?;
    for ip in [
        Ipv4Addr::LOCALHOST,
        super::node::HOST_ADDRESS,
        super::node::KUBERNETES_SERVICE_IP,
    ] {
        params
            .subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(ip)));
    }
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    let serving = params
        .signed_by(&serving_key, &ca)
        .map_err(|e| err("serving certificate", e))?;

    let sa_key = KeyPair::generate().map_err(|e| err("service account key", e))?;

    let pki = Pki {
        ca_cert: dir.join("ca.crt"),
        ca_key: dir.join("ca.key"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        sa_key: dir.join("sa.key"),
        sa_pub: dir.join("sa.pub"),
        ca_pem: ca.pem(),
    };
    let files = [
        (&pki.ca_cert, pki.ca_pem.clone()),
        (&pki.ca_key, ca_key_pem),
        (&pki.serving_cert, serving.pem()),
        (&pki.serving_key, serving_key.serialize_pem()),
        (&pki.sa_key, sa_key.serialize_pem()),
        (&pki.sa_pub, sa_key.public_key_pem()),
    ];
    for (path, content) in files {
        std::fs::write(path, content).map_err(|e| super::TestEnvError::io(path, e))?;
    }
    Ok(pki)
}
