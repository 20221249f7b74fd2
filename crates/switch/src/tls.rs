//! TLS for the OpenFlow channel (`ssl:` and `pssl:` targets) and the OVSDB connection
//! (`--ovsdb ssl:IP:PORT`, through [`Tls::ovsdb_connector`]: one configuration for both, made
//! here once), with rustls on the `ring` provider — no OpenSSL. The options are Open vSwitch's: `--private-key`, `--certificate`,
//! `--ca-cert` (the peer's certificate must chain to it, both directions: a passive listener
//! demands a client certificate), `--ssl-protocols` and `--ssl-ciphers` (mapped to what rustls
//! offers, see [`parse_protocols`] and [`parse_ciphers`]).
//!
//! As in OVS, a peer is authenticated by its certificate's chain to the CA, not by a host name:
//! the switch connecting to `ssl:10.0.0.1` accepts any certificate the CA signed (the name
//! check webpki would add is skipped, the chain and signature checks are kept).
//!
//! `--bootstrap-ca-cert FILE` (OVS's trust on first use) instead of `--ca-cert`: when FILE
//! exists it is the CA, as `--ca-cert` would be. When it does not, the first `ssl:` controller
//! the switch connects to is trusted for its CA: the top of the certificate chain it sends must
//! be self-signed (a controller sends its CA only when told to: `ovs-testcontroller
//! --peer-ca-cert`, `ovs-vsctl set-ssl ... --peer-ca-cert`), the chain must verify against it;
//! it is then written to FILE (PEM, created read-only, never overwritten), logged with its
//! subject, and — as OVS does — that first connection is dropped and the switch reconnects,
//! checking the controller against the saved CA from then on, as every later run does. Until
//! then a `pssl:` listener takes no connection (each refused with a log line): it has no CA to
//! check clients with. [`Tls::load`] reads the options, [`Tls::client_config`] and
//! [`Tls::server_config`] give each new connection the configuration of the moment.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{ring as provider, CryptoProvider};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme,
    SupportedCipherSuite, SupportedProtocolVersion,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use crate::Error;

/// OVS's TLS options, as given (paths not yet read).
#[derive(Clone, Debug, Default)]
pub struct TlsSettings {
    /// `--private-key`: PEM (PKCS#1, PKCS#8 or SEC1), the key of `certificate`.
    pub private_key: Option<PathBuf>,
    /// `--certificate`: PEM, the switch's certificate (and any intermediates after it).
    pub certificate: Option<PathBuf>,
    /// `--ca-cert`: PEM, the CA(s) a peer's certificate must chain to.
    pub ca_cert: Option<PathBuf>,
    /// `--bootstrap-ca-cert`: PEM, the CA — saved from the first controller when the file does
    /// not exist yet (module docs). Not with `ca_cert`.
    pub bootstrap_ca_cert: Option<PathBuf>,
    /// `--ssl-protocols`, e.g. `TLSv1.2,TLSv1.3` (default: both).
    pub protocols: Option<String>,
    /// `--ssl-ciphers`, OpenSSL-style, e.g. `HIGH:!aNULL:!MD5` (default: every suite rustls has).
    pub ciphers: Option<String>,
}

/// Loaded TLS configurations for both directions (module docs).
pub struct Tls {
    /// What the configurations are built of.
    parts: Parts,
    configs: RwLock<Configs>,
}

/// The switch's own credentials and settings.
struct Parts {
    key: PrivateKeyDer<'static>,
    chain: Vec<CertificateDer<'static>>,
    cert_path: PathBuf,
    key_path: PathBuf,
    versions: Vec<&'static SupportedProtocolVersion>,
    provider: Arc<CryptoProvider>,
}

struct Configs {
    /// `None` while the CA is being bootstrapped.
    server: Option<Arc<ServerConfig>>,
    client: Arc<ClientConfig>,
    /// `--bootstrap-ca-cert`'s file, while it does not exist yet.
    bootstrapping: Option<PathBuf>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls { .. }")
    }
}

/// The protocol versions rustls offers, by OVS's names.
const PROTOCOLS: [(&str, &SupportedProtocolVersion); 2] =
    [("TLSv1.2", &rustls::version::TLS12), ("TLSv1.3", &rustls::version::TLS13)];

/// `--ssl-protocols`: a comma-separated list of `TLSv1.2` and `TLSv1.3` (OVS's syntax; a name
/// ending in `+` means "and later"). `TLSv1` and `TLSv1.1` are refused: rustls does not offer them.
pub fn parse_protocols(s: &str) -> Result<Vec<&'static SupportedProtocolVersion>, Error> {
    let mut out: Vec<&'static SupportedProtocolVersion> = Vec::new();
    for word in s.split(',').map(str::trim).filter(|w| !w.is_empty()) {
        let (name, later) = match word.strip_suffix('+') {
            Some(n) => (n, true),
            None => (word, false),
        };
        let Some(i) = PROTOCOLS.iter().position(|(n, _)| n.eq_ignore_ascii_case(name)) else {
            let why = if ["TLSv1", "TLSv1.1", "SSLv3", "SSLv2"].iter().any(|n| n.eq_ignore_ascii_case(name)) {
                "rustls does not offer it (too old)"
            } else {
                "unknown protocol"
            };
            return Err(Error(format!("--ssl-protocols '{s}': {word}: {why}; expected a list of TLSv1.2, TLSv1.3")));
        };
        let take = if later { &PROTOCOLS[i..] } else { &PROTOCOLS[i..=i] };
        for (_, v) in take {
            if !out.iter().any(|o| o.version == v.version) {
                out.push(v);
            }
        }
    }
    if out.is_empty() {
        return Err(Error(format!("--ssl-protocols '{s}': no protocol; expected a list of TLSv1.2, TLSv1.3")));
    }
    Ok(out)
}

/// Every suite of the ring provider with its OpenSSL name (OVS's `--ssl-ciphers` is an OpenSSL
/// cipher list) and the IANA name rustls prints.
fn suites() -> Vec<(&'static str, SupportedCipherSuite)> {
    provider::ALL_CIPHER_SUITES
        .iter()
        .map(|s| {
            let openssl = match format!("{:?}", s.suite()).as_str() {
                "TLS13_AES_256_GCM_SHA384" => "TLS_AES_256_GCM_SHA384",
                "TLS13_AES_128_GCM_SHA256" => "TLS_AES_128_GCM_SHA256",
                "TLS13_CHACHA20_POLY1305_SHA256" => "TLS_CHACHA20_POLY1305_SHA256",
                "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => "ECDHE-ECDSA-AES256-GCM-SHA384",
                "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => "ECDHE-ECDSA-AES128-GCM-SHA256",
                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256" => "ECDHE-ECDSA-CHACHA20-POLY1305",
                "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => "ECDHE-RSA-AES256-GCM-SHA384",
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => "ECDHE-RSA-AES128-GCM-SHA256",
                "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256" => "ECDHE-RSA-CHACHA20-POLY1305",
                _ => "",
            };
            (openssl, *s)
        })
        .collect()
}

/// OpenSSL cipher-list words that select every suite rustls offers (all of them are "HIGH":
/// AEAD, forward secret, authenticated).
const ALL_WORDS: [&str; 4] = ["DEFAULT", "HIGH", "ALL", "SECURE"];
/// OpenSSL classes none of rustls's suites belong to: excluding them (`!aNULL`) changes nothing,
/// selecting them alone selects nothing (an error).
const NONE_WORDS: [&str; 12] =
    ["aNULL", "eNULL", "NULL", "MD5", "RC4", "3DES", "DES", "EXPORT", "LOW", "MEDIUM", "PSK", "SRP"];

/// `--ssl-ciphers`: an OpenSSL cipher list (`:`, `,` or space separated) mapped to rustls's
/// suites. Words: `DEFAULT`, `HIGH`, `ALL` (every suite), a suite by its OpenSSL name
/// (`ECDHE-RSA-AES128-GCM-SHA256`) or IANA name (`TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`,
/// `TLS13_AES_128_GCM_SHA256`); `!WORD` or `-WORD` removes, `+WORD` is taken as `WORD`;
/// `@SECLEVEL=N` and `@STRENGTH` are accepted and change nothing; classes no rustls suite is in
/// (`aNULL`, `MD5`, `RC4`, ...) are accepted after `!`. As with OpenSSL, a list that names no
/// TLS 1.3 suite leaves TLS 1.3's suites as they are (OpenSSL keeps those in a separate list).
pub fn parse_ciphers(s: &str) -> Result<Vec<SupportedCipherSuite>, Error> {
    let all = suites();
    let known = || {
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        format!("expected DEFAULT, HIGH, ALL or suites among {}", names.join(", "))
    };
    let mut chosen: Vec<SupportedCipherSuite> = Vec::new();
    let mut removed: Vec<SupportedCipherSuite> = Vec::new();
    let mut named_13 = false;
    for word in s.split([':', ',', ' ']).map(str::trim).filter(|w| !w.is_empty()) {
        if word.starts_with('@') {
            continue;
        }
        let (remove, name) = match word.as_bytes()[0] {
            b'!' | b'-' => (true, &word[1..]),
            b'+' => (false, &word[1..]),
            _ => (false, word),
        };
        let picked: Vec<SupportedCipherSuite> = if ALL_WORDS.iter().any(|w| w.eq_ignore_ascii_case(name)) {
            all.iter().map(|(_, s)| *s).collect()
        } else if let Some((_, suite)) = all
            .iter()
            .find(|(o, s)| o.eq_ignore_ascii_case(name) || format!("{:?}", s.suite()).eq_ignore_ascii_case(name))
        {
            named_13 |= suite.version().version == rustls::ProtocolVersion::TLSv1_3;
            vec![*suite]
        } else if NONE_WORDS.iter().any(|w| w.eq_ignore_ascii_case(name)) {
            if !remove {
                return Err(Error(format!(
                    "--ssl-ciphers '{s}': {word}: rustls offers no such cipher suite; {}",
                    known()
                )));
            }
            Vec::new()
        } else {
            return Err(Error(format!("--ssl-ciphers '{s}': {word}: unknown cipher; {}", known())));
        };
        for p in picked {
            if remove {
                removed.push(p);
            } else if !chosen.iter().any(|c| c.suite() == p.suite()) {
                chosen.push(p);
            }
        }
    }
    if !named_13 {
        for (_, s) in &all {
            let is_13 = s.version().version == rustls::ProtocolVersion::TLSv1_3;
            if is_13 && !chosen.iter().any(|c| c.suite() == s.suite()) {
                chosen.push(*s);
            }
        }
    }
    chosen.retain(|c| !removed.iter().any(|r| r.suite() == c.suite()));
    if chosen.is_empty() {
        return Err(Error(format!("--ssl-ciphers '{s}': selects no cipher suite; {}", known())));
    }
    Ok(chosen)
}

fn read_certs(option: &str, path: &Path) -> Result<Vec<CertificateDer<'static>>, Error> {
    let what = |e: &dyn std::fmt::Display| Error(format!("{option} {}: {e}", path.display()));
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| what(&e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| what(&format!("{e} (expected PEM certificates)")))?;
    if certs.is_empty() {
        return Err(what(&"no certificate in it (expected a PEM 'BEGIN CERTIFICATE' block)"));
    }
    Ok(certs)
}

impl Tls {
    /// Reads the key, the certificate and the CA and builds both directions' configurations;
    /// every missing or unreadable file is an error naming its option.
    pub fn load(s: &TlsSettings) -> Result<Tls, Error> {
        let versions = match &s.protocols {
            Some(p) => parse_protocols(p)?,
            None => PROTOCOLS.iter().map(|(_, v)| *v).collect(),
        };
        let cipher_suites = match &s.ciphers {
            Some(c) => parse_ciphers(c)?,
            None => provider::ALL_CIPHER_SUITES.to_vec(),
        };
        let need = |p: &Option<PathBuf>, option: &str, what: &str| {
            p.clone().ok_or_else(|| Error(format!("an ssl: or pssl: target needs {option} ({what})")))
        };
        let key_path = need(&s.private_key, "--private-key", "the switch's private key, PEM")?;
        let cert_path = need(&s.certificate, "--certificate", "the switch's certificate, PEM")?;
        let ca = match (&s.ca_cert, &s.bootstrap_ca_cert) {
            (Some(_), Some(_)) => {
                return Err(Error("--ca-cert and --bootstrap-ca-cert both name the CA: give one of them".into()))
            }
            (Some(c), None) => Ca::File("--ca-cert", c.clone()),
            (None, Some(b)) if b.exists() => Ca::File("--bootstrap-ca-cert", b.clone()),
            (None, Some(b)) => Ca::Bootstrap(b.clone()),
            (None, None) => {
                need(&None, "--ca-cert", "the CA that signs the peers' certificates, PEM; or --bootstrap-ca-cert")?;
                unreachable!("need(None) is an error")
            }
        };
        let usable = cipher_suites.iter().any(|c| versions.iter().any(|v| v.version == c.version().version));
        if !usable {
            return Err(Error(format!(
                "--ssl-ciphers '{}' has no suite for --ssl-protocols '{}'",
                s.ciphers.as_deref().unwrap_or(""),
                s.protocols.as_deref().unwrap_or("")
            )));
        }
        let key = PrivateKeyDer::from_pem_file(&key_path).map_err(|e| {
            Error(format!("--private-key {}: {e} (expected a PEM private key: RSA, PKCS#8 or EC)", key_path.display()))
        })?;
        let chain = read_certs("--certificate", &cert_path)?;
        let provider = Arc::new(CryptoProvider { cipher_suites, ..provider::default_provider() });
        let parts = Parts { key, chain, cert_path, key_path, versions, provider };
        let configs = match ca {
            Ca::File(option, path) => parts.configs(option, &path)?,
            Ca::Bootstrap(path) => Configs {
                server: None,
                client: parts.client(Arc::new(Bootstrap { path: path.clone(), provider: parts.provider.clone() }))?,
                bootstrapping: Some(path),
            },
        };
        Ok(Tls { parts, configs: RwLock::new(configs) })
    }

    /// The configuration a new `ssl:` connection uses now.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.refresh();
        self.configs.read().unwrap_or_else(|e| e.into_inner()).client.clone()
    }

    /// What `rqvs_ovsdb`'s client asks at each `ssl:` connection to the database: the client
    /// configuration of the moment (the same as an `ssl:` controller's; with
    /// `--bootstrap-ca-cert`, the database server's CA is bootstrapped as a controller's is).
    pub fn ovsdb_connector(self: &Arc<Self>) -> rqvs_ovsdb::TlsConnector {
        let tls = Arc::clone(self);
        Arc::new(move || Ok(tls.client_config()))
    }

    /// The configuration a connection a `pssl:` listener accepts uses now; `Err` (why) while
    /// the CA is being bootstrapped.
    pub fn server_config(&self) -> Result<Arc<ServerConfig>, String> {
        self.refresh();
        let c = self.configs.read().unwrap_or_else(|e| e.into_inner());
        c.server.clone().ok_or_else(|| {
            let path = c.bootstrapping.as_deref().map_or_else(String::new, |p| p.display().to_string());
            format!("no CA to check clients with yet (--bootstrap-ca-cert {path}: no controller has given it)")
        })
    }

    /// Whether the CA is still to be bootstrapped.
    pub fn bootstrapping(&self) -> bool {
        self.refresh();
        self.configs.read().unwrap_or_else(|e| e.into_inner()).bootstrapping.is_some()
    }

    /// Once the bootstrapped CA's file exists, the configurations that check peers with it.
    fn refresh(&self) {
        let pending = self.configs.read().unwrap_or_else(|e| e.into_inner()).bootstrapping.clone();
        let Some(path) = pending.filter(|p| p.exists()) else { return };
        match self.parts.configs("--bootstrap-ca-cert", &path) {
            Ok(c) => *self.configs.write().unwrap_or_else(|e| e.into_inner()) = c,
            // Unreadable (being written, or damaged): stay as we are; said at each connection.
            Err(e) => crate::log_warn!("rqvs switch: {e}"),
        }
    }
}

/// Where the CA comes from.
enum Ca {
    /// The option naming it, and the file.
    File(&'static str, PathBuf),
    /// `--bootstrap-ca-cert`'s file, not there yet.
    Bootstrap(PathBuf),
}

impl Parts {
    /// Both directions' configurations with the CA in `ca_path` (given with `option`).
    fn configs(&self, option: &str, ca_path: &Path) -> Result<Configs, Error> {
        let mut roots = RootCertStore::empty();
        for c in read_certs(option, ca_path)? {
            roots
                .add(c)
                .map_err(|e| Error(format!("{option} {}: not a usable CA certificate: {e}", ca_path.display())))?;
        }
        let roots = Arc::new(roots);
        let client_verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), self.provider.clone())
            .build()
            .map_err(|e| Error(format!("{option} {}: {e}", ca_path.display())))?;
        let server = ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&self.versions)
            .map_err(|e| Error(format!("TLS settings: {e}")))?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| self.pair_error(e))?;
        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, self.provider.clone())
            .build()
            .map_err(|e| Error(format!("{option} {}: {e}", ca_path.display())))?;
        let client = self.client(Arc::new(ChainOnly(server_verifier)))?;
        Ok(Configs { server: Some(Arc::new(server)), client, bootstrapping: None })
    }

    fn client(&self, verifier: Arc<dyn ServerCertVerifier>) -> Result<Arc<ClientConfig>, Error> {
        let c = ClientConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&self.versions)
            .map_err(|e| Error(format!("TLS settings: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_client_auth_cert(self.chain.clone(), self.key.clone_key())
            .map_err(|e| self.pair_error(e))?;
        Ok(Arc::new(c))
    }

    fn pair_error(&self, e: rustls::Error) -> Error {
        Error(format!("--certificate {} with --private-key {}: {e}", self.cert_path.display(), self.key_path.display()))
    }
}

/// The verifier of a controller's certificate while `--bootstrap-ca-cert`'s file does not
/// exist (module docs): the top of the chain, self-signed, is saved as the CA if the chain
/// verifies against it; the connection is refused either way (the switch reconnects).
#[derive(Debug)]
struct Bootstrap {
    path: PathBuf,
    provider: Arc<CryptoProvider>,
}

impl Bootstrap {
    /// Saves `ca` (DER) to the file: created, read-only, never replacing one.
    fn save(&self, ca: &CertificateDer<'_>) -> std::io::Result<()> {
        use std::os::unix::fs::OpenOptionsExt;
        let mut f = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o444).open(&self.path)?;
        f.write_all(pem("CERTIFICATE", ca).as_bytes())?;
        f.sync_all()
    }
}

impl ServerCertVerifier for Bootstrap {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let fail = |why: String| {
            let msg = format!("--bootstrap-ca-cert {}: could not bootstrap the CA: {why}", self.path.display());
            crate::log_warn!("rqvs switch: {msg}");
            Err(rustls::Error::General(msg))
        };
        let ca = intermediates.last().unwrap_or(end_entity);
        match der::self_signed(ca) {
            Ok(true) => {}
            Ok(false) => {
                return fail(format!(
                    "the top of the controller's certificate chain ({} certificate{}) is not self-signed{}",
                    1 + intermediates.len(),
                    if intermediates.is_empty() { "" } else { "s" },
                    if intermediates.is_empty() {
                        ": the controller sends no CA certificate (ovs-testcontroller --peer-ca-cert, ovs-vsctl set-ssl ... --peer-ca-cert)"
                    } else {
                        ""
                    }
                ))
            }
            Err(e) => return fail(format!("the controller's top certificate is not X.509 DER: {e}")),
        }
        // The chain must verify against it, the name aside (as for a CA given with --ca-cert).
        let mut roots = RootCertStore::empty();
        if let Err(e) = roots.add(ca.clone().into_owned()) {
            return fail(format!("the controller's CA certificate is not usable as one: {e}"));
        }
        let check = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), self.provider.clone())
            .build()
            .map_err(|e| rustls::Error::General(e.to_string()))?;
        let below = &intermediates[..intermediates.len().saturating_sub(1)];
        if intermediates.is_empty() {
            return fail("the controller's own certificate is self-signed: it names no CA to trust".into());
        }
        if let Err(e) = ChainOnly(check).verify_server_cert(end_entity, below, server_name, ocsp_response, now) {
            return fail(format!("the controller's certificate does not verify against the CA it sent: {e}"));
        }
        match self.save(ca) {
            Ok(()) => {
                crate::log_info!(
                    "rqvs switch: --bootstrap-ca-cert: saved the controller's CA certificate ({}) to {}; reconnecting to check the controller with it",
                    der::subject_text(ca).unwrap_or_else(|_| "subject unreadable".into()),
                    self.path.display()
                );
                // As OVS: the connection that taught the CA is not used.
                Err(rustls::Error::General("CA certificate bootstrapped; reconnecting with it".into()))
            }
            // Another connection saved it first: the reconnection uses it.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Err(rustls::Error::General("CA certificate bootstrapped; reconnecting with it".into()))
            }
            Err(e) => fail(format!("writing it: {e}")),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// `der` as a PEM block of `label`, 64 columns (RFC 7468).
fn pem(label: &str, der: &[u8]) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::with_capacity(der.len() * 4 / 3 + 4);
    for c in der.chunks(3) {
        let n =
            (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            text.push(if i <= c.len() { char::from(B64[(n >> (18 - 6 * i) & 63) as usize]) } else { '=' });
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

/// Just enough DER to tell whether a certificate is self-signed (its issuer and subject are the
/// same name, what OpenSSL's `X509_check_issued(c, c)` checks first) and to print its subject.
mod der {
    /// One TLV at the start of `b`: (tag, contents, the whole TLV's length).
    fn tlv(b: &[u8]) -> Result<(u8, &[u8], usize), String> {
        let short = || "truncated".to_string();
        let (&tag, rest) = b.split_first().ok_or_else(short)?;
        let (&l0, rest) = rest.split_first().ok_or_else(short)?;
        let (len, head) = if l0 < 0x80 {
            (usize::from(l0), 2)
        } else {
            let n = usize::from(l0 & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return Err("bad length".into());
            }
            (rest[..n].iter().fold(0usize, |a, &x| a << 8 | usize::from(x)), 2 + n)
        };
        let body = b.get(head..head + len).ok_or_else(short)?;
        Ok((tag, body, head + len))
    }

    /// A field: its tag, its contents and its whole TLV.
    type Field<'a> = (u8, &'a [u8], &'a [u8]);

    /// The TBSCertificate's fields, in order.
    fn tbs_fields(cert: &[u8]) -> Result<Vec<Field<'_>>, String> {
        let (tag, c, _) = tlv(cert)?;
        let (tag2, tbs, _) = tlv(c)?;
        if tag != 0x30 || tag2 != 0x30 {
            return Err("not a certificate SEQUENCE".into());
        }
        let mut fields = Vec::new();
        let mut at = tbs;
        while !at.is_empty() {
            let (t, body, n) = tlv(at)?;
            fields.push((t, body, &at[..n]));
            at = &at[n..];
        }
        Ok(fields)
    }

    /// (issuer, subject): whole Name TLVs. The TBSCertificate is `[0] version` (optional),
    /// serial, signature algorithm, issuer, validity, subject, ...
    fn names(cert: &[u8]) -> Result<(&[u8], &[u8]), String> {
        let f = tbs_fields(cert)?;
        let skip = usize::from(f.first().is_some_and(|x| x.0 == 0xa0));
        match (f.get(skip + 2), f.get(skip + 4)) {
            (Some(i), Some(s)) if i.0 == 0x30 && s.0 == 0x30 => Ok((i.2, s.2)),
            _ => Err("no issuer and subject".into()),
        }
    }

    pub fn self_signed(cert: &[u8]) -> Result<bool, String> {
        names(cert).map(|(i, s)| i == s)
    }

    /// The subject's attribute values, `/`-separated (printable ones only).
    pub fn subject_text(cert: &[u8]) -> Result<String, String> {
        let (_, subject) = names(cert)?;
        let (_, mut rdns, _) = tlv(subject)?;
        let mut parts = Vec::new();
        while !rdns.is_empty() {
            let (_, set, n) = tlv(rdns)?;
            rdns = &rdns[n..];
            let (_, atv, _) = tlv(set)?;
            let (_, _oid, m) = tlv(atv)?;
            let (_, value, _) = tlv(&atv[m..])?;
            parts.push(String::from_utf8_lossy(value).into_owned());
        }
        Ok(parts.join("/"))
    }
}

/// A controller's certificate checked as OVS checks it: chained to the CA, in its validity
/// period, signatures verified — but not matched to a host name (OVS's certificates carry none:
/// `ovs-pki` names them `CN=NAME id:UUID`). webpki checks the chain before the name, so a
/// name mismatch means the chain is good.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocols_map_to_rustls() {
        let v = parse_protocols("TLSv1.2,TLSv1.3").unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(parse_protocols("TLSv1.2+").unwrap().len(), 2);
        assert_eq!(parse_protocols("tlsv1.3").unwrap()[0].version, rustls::ProtocolVersion::TLSv1_3);
        let e = parse_protocols("TLSv1,TLSv1.1").unwrap_err().0;
        assert!(e.contains("TLSv1: rustls does not offer it"), "{e}");
        assert!(parse_protocols("QUIC").unwrap_err().0.contains("unknown protocol"));
        assert!(parse_protocols("").unwrap_err().0.contains("no protocol"));
    }

    #[test]
    fn ciphers_map_to_rustls() {
        let all = parse_ciphers("HIGH:!aNULL:!MD5:@SECLEVEL=2").unwrap();
        assert_eq!(all.len(), provider::ALL_CIPHER_SUITES.len());
        // One TLS 1.2 suite by its OpenSSL name: it, plus TLS 1.3's (OpenSSL keeps those apart).
        let one = parse_ciphers("ECDHE-RSA-AES128-GCM-SHA256").unwrap();
        let names: Vec<String> = one.iter().map(|s| format!("{:?}", s.suite())).collect();
        assert!(names.contains(&"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_string()), "{names:?}");
        assert_eq!(names.iter().filter(|n| n.starts_with("TLS_ECDHE")).count(), 1);
        assert_eq!(names.iter().filter(|n| n.starts_with("TLS13_")).count(), 3);
        // A TLS 1.3 suite named: only it among TLS 1.3's.
        let only13 = parse_ciphers("TLS_AES_256_GCM_SHA384").unwrap();
        assert_eq!(only13.len(), 1);
        let removed = parse_ciphers("ALL:!ECDHE-RSA-CHACHA20-POLY1305").unwrap();
        assert_eq!(removed.len(), provider::ALL_CIPHER_SUITES.len() - 1);
        assert!(parse_ciphers("RC4-SHA").unwrap_err().0.contains("RC4-SHA: unknown cipher"));
        assert!(parse_ciphers("MD5").unwrap_err().0.contains("rustls offers no such cipher suite"));
        assert!(parse_ciphers("!ALL").unwrap_err().0.contains("selects no cipher suite"));
    }

    #[test]
    fn pem_encodes_what_pem_decoding_reads_back() {
        for n in [0usize, 1, 2, 3, 47, 48, 49, 700] {
            let der: Vec<u8> = (0..n).map(|i| (i * 37 + n) as u8).collect();
            let text = pem("CERTIFICATE", &der);
            assert!(text.lines().all(|l| l.len() <= 64), "{text}");
            let back = CertificateDer::from_pem_slice(text.as_bytes()).unwrap();
            assert_eq!(back.as_ref(), &der[..], "{n} bytes");
        }
    }

    #[test]
    fn der_names_of_a_malformed_certificate_are_errors_not_panics() {
        for bad in [&[][..], &[0x30], &[0x30, 0x82, 0xff], &[0x30, 0x03, 0x30, 0x01, 0x02], &[0x04, 0x00]] {
            assert!(der::self_signed(bad).is_err(), "{bad:?}");
            assert!(der::subject_text(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn ca_cert_and_bootstrap_ca_cert_are_one_or_the_other() {
        let s = TlsSettings {
            private_key: Some("/k".into()),
            certificate: Some("/c".into()),
            ca_cert: Some("/a".into()),
            bootstrap_ca_cert: Some("/b".into()),
            ..TlsSettings::default()
        };
        assert!(Tls::load(&s).unwrap_err().0.contains("give one of them"));
    }

    #[test]
    fn missing_files_name_their_option() {
        let s = TlsSettings {
            private_key: Some("/nonexistent/key.pem".into()),
            certificate: Some("/nonexistent/cert.pem".into()),
            ca_cert: Some("/nonexistent/ca.pem".into()),
            ..TlsSettings::default()
        };
        assert!(Tls::load(&s).unwrap_err().0.starts_with("--private-key /nonexistent/key.pem"));
        let e = Tls::load(&TlsSettings { ca_cert: None, ..s }).unwrap_err().0;
        assert!(e.contains("needs --ca-cert"), "{e}");
    }
}
