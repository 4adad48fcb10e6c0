//! A throwaway PKI for TLS tests: a CA, a server certificate for `localhost` only, a client
//! certificate, and a second CA that signs nothing we use.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

pub struct Pki {
    _dir: tempfile::TempDir,
    pub ca: PathBuf,
    pub other_ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write PEM");
    path
}

fn ca(name: &str) -> CertifiedIssuer<'static, KeyPair> {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.distinguished_name.push(DnType::CommonName, name);
    CertifiedIssuer::self_signed(params, KeyPair::generate().expect("CA key"))
        .expect("self-signed CA")
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

impl Pki {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let root = ca("throwaway test CA");
        let other = ca("some other CA");

        let server_key = KeyPair::generate().expect("server key");
        let mut server =
            CertificateParams::new(vec!["localhost".to_owned()]).expect("server params");
        server
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server_cert = server.signed_by(&server_key, &root).expect("server cert");

        let client_key = KeyPair::generate().expect("client key");
        let mut client = CertificateParams::new(Vec::<String>::new()).expect("client params");
        client
            .distinguished_name
            .push(DnType::CommonName, "test client");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client.signed_by(&client_key, &root).expect("client cert");

        let d = dir.path();
        Self {
            ca: write(d, "ca.pem", &root.pem()),
            other_ca: write(d, "other-ca.pem", &other.pem()),
            server_cert: write(d, "server.pem", &server_cert.pem()),
            server_key: write(d, "server.key", &server_key.serialize_pem()),
            client_cert: write(d, "client.pem", &client_cert.pem()),
            client_key: write(d, "client.key", &client_key.serialize_pem()),
            _dir: dir,
        }
    }

    /// redis-server arguments for TLS beside the plain port (which the fixture keeps for its
    /// own checks); `verify_clients` demands client certificates. The TLS port comes from
    /// [`RedisBuilder::tls_port`](crate::redis_server::RedisBuilder::tls_port).
    pub fn redis_args(&self, verify_clients: bool) -> Vec<String> {
        let p = |p: &PathBuf| p.to_str().expect("utf-8 path").to_owned();
        vec![
            "--tls-cert-file".into(),
            p(&self.server_cert),
            "--tls-key-file".into(),
            p(&self.server_key),
            "--tls-ca-cert-file".into(),
            p(&self.ca),
            "--tls-auth-clients".into(),
            if verify_clients { "yes" } else { "no" }.into(),
        ]
    }
}
