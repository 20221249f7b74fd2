//! TLS for the OpenFlow channel (`ssl:` and `pssl:` targets), with rustls on the `ring`
//! provider — no OpenSSL. The options are Open vSwitch's: `--private-key`, `--certificate`,
//! `--ca-cert` (the peer's certificate must chain to it, both directions: a passive listener
//! demands a client certificate), `--ssl-protocols` and `--ssl-ciphers` (mapped to what rustls
//! offers, see [`parse_protocols`] and [`parse_ciphers`]).
//!
//! As in OVS, a peer is authenticated by its certificate's chain to the CA, not by a host name:
//! the switch connecting to `ssl:10.0.0.1` accepts any certificate the CA signed (the name
//! check webpki would add is skipped, the chain and signature checks are kept).
//!
//! `--bootstrap-ca-cert` (OVS: trust the CA a controller sends on first contact) is not
//! implemented: the option is refused with a usage error naming `--ca-cert`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

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
    /// `--ssl-protocols`, e.g. `TLSv1.2,TLSv1.3` (default: both).
    pub protocols: Option<String>,
    /// `--ssl-ciphers`, OpenSSL-style, e.g. `HIGH:!aNULL:!MD5` (default: every suite rustls has).
    pub ciphers: Option<String>,
}

/// Loaded TLS configurations for both directions.
pub struct Tls {
    pub(crate) server: Arc<ServerConfig>,
    pub(crate) client: Arc<ClientConfig>,
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
        let ca_path = need(&s.ca_cert, "--ca-cert", "the CA that signs the peers' certificates, PEM")?;
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
        let mut roots = RootCertStore::empty();
        for c in read_certs("--ca-cert", &ca_path)? {
            roots
                .add(c)
                .map_err(|e| Error(format!("--ca-cert {}: not a usable CA certificate: {e}", ca_path.display())))?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(CryptoProvider { cipher_suites, ..provider::default_provider() });
        let tls_err = |what: &str, e: rustls::Error| Error(format!("TLS {what}: {e}"));
        let client_verifier = WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
            .build()
            .map_err(|e| Error(format!("--ca-cert {}: {e}", ca_path.display())))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| tls_err("settings", e))?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(chain.clone(), key.clone_key())
            .map_err(|e| {
                Error(format!("--certificate {} with --private-key {}: {e}", cert_path.display(), key_path.display()))
            })?;
        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| Error(format!("--ca-cert {}: {e}", ca_path.display())))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&versions)
            .map_err(|e| tls_err("settings", e))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(server_verifier)))
            .with_client_auth_cert(chain, key)
            .map_err(|e| {
                Error(format!("--certificate {} with --private-key {}: {e}", cert_path.display(), key_path.display()))
            })?;
        Ok(Tls { server: Arc::new(server), client: Arc::new(client) })
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
