//! Peer authentication: mutual TLS between the servers of a cluster, and opt-in TLS for clients.
//!
//! Every node has a certificate signed by the cluster's CA whose subject alternative name is the DNS name
//! `node-<id>.snowline` ([`node_name`]). A server accepts plain TCP and TLS on its one port, told apart by
//! the first byte (a TLS handshake starts with `0x16`; a frame starts with its 4-byte length prefix, whose
//! first byte is `0x00` for any frame under 16 MiB):
//!
//! * **TLS with a client certificate the CA signed**: a peer. Which node it is comes from the certificate
//!   (the one node name it is valid for), never from a frame; its `Hello` and every message it sends must
//!   be in the name of a server that node hosts.
//! * **Plain TCP, or TLS without a certificate**: a client. It may send client requests only; a `Hello` in
//!   a server's name is refused with an `Error` frame and the connection closed. With `clients = true` in
//!   the config's `[tls]`, plain client connections are refused too.
//!
//! A server connecting to a peer verifies that the peer's certificate names the node it meant to reach.
//! `insecure = true` in the config (`cluster up --insecure`) turns all of this off: any connection may then
//! speak for any server, as before authentication existed. It is for experiments only.
//!
//! [`generate`] makes a CA and node certificates with rcgen (`cluster up` does it for a local cluster,
//! `snowline certs` for a multi-host one); the CA's private key is not kept, so no one can add a node
//! later without new certificates for every node.

use crate::NetError;
use crate::config::{ClusterConfig, TlsConfig};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The first byte of a TLS handshake record.
pub(crate) const TLS_HANDSHAKE_BYTE: u8 = 0x16;

/// The name a node's certificate is issued for.
pub fn node_name(id: u32) -> String {
    format!("node-{id}.snowline")
}

fn server_name(id: u32) -> ServerName<'static> {
    ServerName::try_from(node_name(id)).expect("node-N.snowline is a valid DNS name")
}

/// A cluster's certificates, in PEM: the CA's, and each node's certificate and private key.
pub struct ClusterCerts {
    pub ca_pem: String,
    /// `(node id, certificate, private key)`.
    pub nodes: Vec<(u32, String, String)>,
}

fn tls_error(what: impl std::fmt::Display) -> NetError {
    NetError::Tls(what.to_string())
}

/// Make a fresh CA and a certificate for each of `node_ids` (rcgen's default validity, which does not
/// expire in practice: a cluster's certificates are replaced by making new ones).
pub fn generate(node_ids: impl IntoIterator<Item = u32>) -> Result<ClusterCerts, NetError> {
    let err = |e: rcgen::Error| tls_error(format!("cannot generate certificates: {e}"));
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name.push(DnType::CommonName, "snowline cluster CA");
    ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let ca_pem = ca.self_signed(&ca_key).map_err(err)?.pem();
    let issuer = Issuer::new(ca, ca_key);
    let mut nodes = Vec::new();
    for id in node_ids {
        let key = KeyPair::generate().map_err(err)?;
        let mut params = CertificateParams::new(vec![node_name(id)]).map_err(err)?;
        params.distinguished_name.push(DnType::CommonName, node_name(id));
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &issuer).map_err(err)?;
        nodes.push((id, cert.pem(), key.serialize_pem()));
    }
    Ok(ClusterCerts { ca_pem, nodes })
}

impl ClusterCerts {
    /// Write `ca.pem`, `node-ID.pem` and `node-ID.key` (owner-readable only) into `dir` and return the
    /// `[tls]` section naming them (absolute paths when `dir` is).
    pub fn write(&self, dir: &Path) -> Result<TlsConfig, NetError> {
        std::fs::create_dir_all(dir)?;
        let write = |name: &str, text: &str, private: bool| -> Result<(), NetError> {
            let path = dir.join(name);
            let mut opts = std::fs::OpenOptions::new();
            opts.write(true).create(true).truncate(true);
            if private {
                use std::os::unix::fs::OpenOptionsExt;
                opts.mode(0o600);
            }
            use std::io::Write;
            opts.open(&path)
                .and_then(|mut f| f.write_all(text.as_bytes()))
                .map_err(|e| tls_error(format!("cannot write {}: {e}", path.display())))
        };
        write("ca.pem", &self.ca_pem, false)?;
        for (id, cert, key) in &self.nodes {
            write(&format!("node-{id}.pem"), cert, false)?;
            write(&format!("node-{id}.key"), key, true)?;
        }
        Ok(TlsConfig {
            ca: dir.join("ca.pem"),
            cert: dir.join("node-{id}.pem").display().to_string(),
            key: dir.join("node-{id}.key").display().to_string(),
            clients: false,
        })
    }
}

fn read(path: &Path, what: &str) -> Result<Vec<u8>, NetError> {
    std::fs::read(path).map_err(|e| tls_error(format!("cannot read the {what} {}: {e}", path.display())))
}

fn certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, NetError> {
    let pem = read(path, what)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_error(format!("the {what} {} is not PEM certificates: {e}", path.display())))?;
    if certs.is_empty() {
        return Err(tls_error(format!("the {what} {} holds no certificate", path.display())));
    }
    Ok(certs)
}

fn roots(tls: &TlsConfig) -> Result<Arc<RootCertStore>, NetError> {
    let mut roots = RootCertStore::empty();
    for ca in certs(&tls.ca, "CA certificate")? {
        roots.add(ca).map_err(|e| tls_error(format!("bad CA certificate {}: {e}", tls.ca.display())))?;
    }
    Ok(Arc::new(roots))
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A `{id}` template of the `[tls]` section, for node `id`.
fn node_path(template: &str, id: u32) -> PathBuf {
    PathBuf::from(template.replace("{id}", &id.to_string()))
}

/// A node's certificate and private key, in PEM.
pub struct PemIdentity {
    pub cert: Vec<u8>,
    pub key: Vec<u8>,
}

/// Node `id`'s certificate and private key when its clients must use TLS (`[tls] clients = true`): the
/// identity its other client-facing listeners (the gRPC API) present. `Ok(None)` otherwise.
pub fn client_facing_identity(config: &ClusterConfig, id: u32) -> Result<Option<PemIdentity>, NetError> {
    let Some(tls) = config.tls.as_ref().filter(|t| t.clients) else { return Ok(None) };
    let cert = read(&node_path(&tls.cert, id), &format!("certificate of node {id}"))?;
    let key = read(&node_path(&tls.key, id), &format!("private key of node {id}"))?;
    Ok(Some(PemIdentity { cert, key }))
}

/// What a server needs to authenticate its peers and itself.
#[derive(Clone)]
pub struct NodeTls {
    pub(crate) acceptor: TlsAcceptor,
    pub(crate) connector: TlsConnector,
    /// Every node id of the cluster, to tell which one a peer certificate names.
    node_ids: Vec<u32>,
    /// Plain client connections are refused (`[tls] clients = true`).
    pub(crate) clients_need_tls: bool,
}

impl NodeTls {
    /// Load node `id`'s certificate and key and the CA named by `config`'s `[tls]` section; `Ok(None)` for
    /// an `insecure` cluster.
    pub fn load(config: &ClusterConfig, id: u32) -> Result<Option<Self>, NetError> {
        let Some(tls) = &config.tls else { return Ok(None) };
        let (cert_path, key_path) = (node_path(&tls.cert, id), node_path(&tls.key, id));
        let chain = certs(&cert_path, &format!("certificate of node {id}"))?;
        let key = PrivateKeyDer::from_pem_slice(&read(&key_path, &format!("private key of node {id}"))?)
            .map_err(|e| tls_error(format!("the private key {} is not a PEM key: {e}", key_path.display())))?;
        let roots = roots(tls)?;
        let bad = |e: rustls::Error| tls_error(format!("node {id}'s TLS set-up ({}): {e}", cert_path.display()));
        let verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider())
            // A connection without a certificate is a client; it is told apart after the handshake.
            .allow_unauthenticated()
            .build()
            .map_err(|e| tls_error(format!("cannot verify peers with {}: {e}", tls.ca.display())))?;
        let server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(bad)?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(bad)?;
        let client = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(bad)?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, key)
            .map_err(bad)?;
        Ok(Some(Self {
            acceptor: TlsAcceptor::from(Arc::new(server)),
            connector: TlsConnector::from(Arc::new(client)),
            node_ids: config.nodes.iter().map(|n| n.id).collect(),
            clients_need_tls: tls.clients,
        }))
    }

    /// The node a verified peer certificate names, if any (a certificate-less connection is a client).
    pub(crate) fn identify(&self, peer_certs: Option<&[CertificateDer<'_>]>) -> Option<u32> {
        let cert = webpki::EndEntityCert::try_from(peer_certs?.first()?).ok()?;
        self.node_ids.iter().copied().find(|id| cert.verify_is_valid_for_subject_name(&server_name(*id)).is_ok())
    }

    /// How to reach node `id`, verifying it is that node.
    pub(crate) fn dial(&self, id: u32) -> Dial {
        Dial { connector: self.connector.clone(), name: server_name(id) }
    }
}

/// How a client runtime reaches servers when the cluster wants client TLS (`[tls] clients = true`).
pub fn client_dialer(config: &ClusterConfig) -> Result<Option<ClientDialer>, NetError> {
    let Some(tls) = config.tls.as_ref().filter(|t| t.clients) else { return Ok(None) };
    let client = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_root_certificates(roots(tls)?)
        .with_no_client_auth();
    Ok(Some(ClientDialer(TlsConnector::from(Arc::new(client)))))
}

/// See [`client_dialer`].
#[derive(Clone)]
pub struct ClientDialer(TlsConnector);

impl ClientDialer {
    pub(crate) fn dial(&self, id: u32) -> Dial {
        Dial { connector: self.0.clone(), name: server_name(id) }
    }
}

/// TLS on an outbound connection to one node.
#[derive(Clone)]
pub(crate) struct Dial {
    pub connector: TlsConnector,
    pub name: ServerName<'static>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_certificate_names_its_node_and_no_other() {
        let dir = std::env::temp_dir().join(format!("snowline-tls-{}", std::process::id()));
        let mut config = ClusterConfig::local("cv", 1, 3, 20000);
        config.tls = Some(generate([0, 1, 2]).unwrap().write(&dir).unwrap());
        let tls = NodeTls::load(&config, 0).unwrap().unwrap();
        for id in 0..3 {
            let der = CertificateDer::from_pem_file(dir.join(format!("node-{id}.pem"))).unwrap();
            assert_eq!(tls.identify(Some(&[der])), Some(id));
        }
        assert_eq!(tls.identify(None), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_files_are_named() {
        let mut config = ClusterConfig::local("cv", 1, 1, 20000);
        config.tls = Some(TlsConfig {
            ca: "/nonexistent/ca.pem".into(),
            cert: "/nonexistent/node-{id}.pem".into(),
            key: "/nonexistent/node-{id}.key".into(),
            clients: false,
        });
        let e = NodeTls::load(&config, 0).err().unwrap().to_string();
        assert!(e.contains("/nonexistent/node-0.pem"), "{e}");
    }
}
