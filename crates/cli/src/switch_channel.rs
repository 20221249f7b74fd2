//! `rqvs switch`'s TLS options (OVS's) for the OpenFlow channel's `ssl:` and `pssl:` targets
//! and the `--ovsdb ssl:` remote ([`rqvs_switch::tls`]).

use std::path::PathBuf;
use std::sync::Arc;

use rqvs_switch::openflow::{Tls, TlsSettings};

use crate::Failure;

/// The TLS options (Open vSwitch's names), used by `ssl:` controllers and a `pssl:` listener.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TlsArgs {
    /// With ssl:/pssl: targets: the switch's private key (PEM: RSA, PKCS#8 or EC), e.g. one
    /// `ovs-pki req+sign` made.
    #[arg(long, value_name = "FILE")]
    private_key: Option<PathBuf>,
    /// With ssl:/pssl: targets: the switch's certificate (PEM), signed by the CA the peers trust.
    #[arg(long, value_name = "FILE")]
    certificate: Option<PathBuf>,
    /// With ssl:/pssl: targets: the CA certificate (PEM) a peer's certificate must chain to; a
    /// peer without one, or with another CA's, is refused (both directions).
    #[arg(long, value_name = "FILE")]
    ca_cert: Option<PathBuf>,
    /// With ssl:/pssl: targets, instead of --ca-cert: the CA certificate file, or — when it does
    /// not exist yet — where to save the CA the first ssl: controller sends (trust on first
    /// use, as OVS: the controller must send its CA, e.g. ovs-testcontroller --peer-ca-cert);
    /// the switch then reconnects and checks every peer against it.
    #[arg(long, value_name = "FILE")]
    bootstrap_ca_cert: Option<PathBuf>,
    /// With ssl:/pssl: targets: TLS versions, comma-separated, of TLSv1.2 and TLSv1.3 (`+`:
    /// and later); rustls offers no older one [default: TLSv1.2,TLSv1.3].
    #[arg(long, value_name = "LIST")]
    ssl_protocols: Option<String>,
    /// With ssl:/pssl: targets: an OpenSSL cipher list (e.g. `HIGH:!aNULL:!MD5`, or suite names
    /// such as ECDHE-RSA-AES128-GCM-SHA256) mapped to rustls's suites; a name rustls lacks is
    /// an error [default: every suite rustls offers].
    #[arg(long, value_name = "LIST")]
    ssl_ciphers: Option<String>,
}

const IDS: [&str; 6] = ["private_key", "certificate", "ca_cert", "bootstrap_ca_cert", "ssl_protocols", "ssl_ciphers"];

impl TlsArgs {
    /// Usage errors: TLS options without an ssl:/pssl: target; --ca-cert with
    /// --bootstrap-ca-cert.
    pub fn unused(&self, g: &crate::args::Given, any_tls_target: bool) -> Result<(), String> {
        for id in IDS {
            g.refuse(
                id,
                !any_tls_target,
                "a TLS setting; used only with --openflow pssl:..., --controller ssl:... or --ovsdb ssl:...",
            )?;
        }
        g.refuse("bootstrap_ca_cert", self.ca_cert.is_some(), "names the CA, as --ca-cert does: give one of them")
    }

    /// The loaded TLS configuration when a target needs it.
    pub fn load(&self, any_tls_target: bool) -> Result<Option<Arc<Tls>>, Failure> {
        if !any_tls_target {
            return Ok(None);
        }
        let s = TlsSettings {
            private_key: self.private_key.clone(),
            certificate: self.certificate.clone(),
            ca_cert: self.ca_cert.clone(),
            bootstrap_ca_cert: self.bootstrap_ca_cert.clone(),
            protocols: self.ssl_protocols.clone(),
            ciphers: self.ssl_ciphers.clone(),
        };
        Ok(Some(Arc::new(Tls::load(&s)?)))
    }
}
