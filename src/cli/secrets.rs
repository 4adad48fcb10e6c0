//! Files that flags name and that hold secrets or certificates: read once at start, refused when
//! unreadable, empty or of the wrong kind, and never shown, by the one rule of
//! [`secret_file`](crate::secret_file).

use std::path::Path;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::CliError;
use crate::lease::Secret;
use crate::secret_file::{SecretFileError, read_nonempty};

/// The refusal of the file `path` that `flag` names.
fn refused<'a>(flag: &'static str, path: &'a Path) -> impl Fn(SecretFileError) -> CliError + 'a {
    move |e| file_rule(flag, path, e.to_string())
}

/// A secret from a file, trailing newlines removed.
pub(super) fn read_secret(flag: &'static str, path: &Path) -> Result<Secret, CliError> {
    crate::secret_file::read_secret(path).map_err(refused(flag, path))
}

/// A user name from a file, trimmed as `--redis-username` is: no ACL user name holds
/// whitespace (a file of whitespace alone is refused as empty).
pub(super) fn read_username(flag: &'static str, path: &Path) -> Result<String, CliError> {
    let name = read_secret(flag, path)?.expose().trim().to_owned();
    if name.is_empty() {
        return Err(refused(flag, path)(SecretFileError::Empty));
    }
    Ok(name)
}

/// A PEM file: must hold at least one `-----BEGIN` block.
pub(super) fn read_pem(flag: &'static str, path: &Path) -> Result<Vec<u8>, CliError> {
    let bytes = read_nonempty(path).map_err(refused(flag, path))?;
    if !bytes.windows(10).any(|w| w == b"-----BEGIN") {
        return Err(file_rule(
            flag,
            path,
            "is not PEM (no -----BEGIN block)".into(),
        ));
    }
    Ok(bytes)
}

/// `rule` of the file `path` that `flag` names.
fn file_rule(flag: &'static str, path: &Path, rule: String) -> CliError {
    CliError::File {
        flag,
        path: path.to_owned(),
        rule,
    }
}

/// A CA bundle: each certificate in it one that rustls takes for a trust anchor (else the URL's
/// parse, or the first dial, would refuse it in other words).
pub(super) fn read_ca(flag: &'static str, path: &Path) -> Result<Vec<u8>, CliError> {
    let pem = read_pem(flag, path)?;
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let added = cert
            .map_err(|e| e.to_string())
            .and_then(|c| roots.add(c).map_err(|e| e.to_string()));
        if let Err(e) = added {
            return Err(file_rule(
                flag,
                path,
                format!("holds a certificate that cannot be read: {e}"),
            ));
        }
    }
    Ok(pem)
}

/// A client certificate (`cert`: its file and PEM) and its key (`key`), as rustls takes them for
/// mutual TLS at the first dial: both readable, and the key the certificate's.
pub(super) fn check_client_pair(
    cert: (&Path, &[u8]),
    key: (&Path, &Secret),
) -> Result<(), CliError> {
    let chain = CertificateDer::pem_slice_iter(cert.1)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            file_rule(
                "redis-client-cert-file",
                cert.0,
                format!("holds a certificate that cannot be read: {e}"),
            )
        })?;
    let refused = |rule: String| file_rule("redis-client-key-file", key.0, rule);
    let der = PrivateKeyDer::from_pem_slice(key.1.expose().as_bytes())
        .map_err(|e| refused(format!("holds no private key that can be read: {e}")))?;
    rustls::ClientConfig::builder()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_client_auth_cert(chain, der)
        .map_err(|e| {
            refused(format!(
                "is not a key for the certificate in --redis-client-cert-file: {e}"
            ))
        })?;
    Ok(())
}
