//! Certificates made by Open vSwitch's `ovs-pki`, as OVS's own TLS setups use them: one PKI with
//! a switch CA and a controller CA, a switch's credentials and a controller's (or a database
//! server's: OVS gives `ovsdb-server` a controller-CA certificate too), each side checking the
//! other with the other side's CA.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Key and certificate of one side, and the CA its peer's certificate must chain to.
pub struct Creds {
    pub key: PathBuf,
    pub cert: PathBuf,
    pub peer_ca: PathBuf,
}

/// A PKI made by `ovs-pki` in `dir/NAME`: (the switch's credentials, the other side's, named
/// `peer` — e.g. `ctl` or `db`). Panics with `ovs-pki`'s error when a step fails.
pub fn pki(dir: &Path, name: &str, peer: &str) -> (Creds, Creds) {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    let pki_dir = format!("--dir={}", root.join("pki").display());
    for args in [&["init"][..], &["req+sign", "sw", "switch"], &["req+sign", peer, "controller"]] {
        let out = Command::new("ovs-pki").arg(&pki_dir).args(args).current_dir(&root).stdin(Stdio::null()).output();
        let out = out.expect("run ovs-pki");
        assert!(out.status.success(), "ovs-pki {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    (
        Creds {
            key: root.join("sw-privkey.pem"),
            cert: root.join("sw-cert.pem"),
            peer_ca: root.join("pki/controllerca/cacert.pem"),
        },
        Creds {
            key: root.join(format!("{peer}-privkey.pem")),
            cert: root.join(format!("{peer}-cert.pem")),
            peer_ca: root.join("pki/switchca/cacert.pem"),
        },
    )
}
