//! `include/rqvs.h` is what cbindgen makes of this crate now: the committed header is compared
//! with a fresh one, and a difference fails with how to regenerate it (cbindgen runs here as a
//! library, so CI needs no `cargo install`).

use std::path::PathBuf;

#[test]
fn header_is_current() {
    let crate_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = crate_dir.join("../../include/rqvs.h");
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml");
    let bindings = cbindgen::Builder::new()
        .with_crate(&crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen cannot generate the header");
    let mut fresh = Vec::new();
    bindings.write(&mut fresh);
    let fresh = String::from_utf8(fresh).expect("UTF-8 header");
    if std::env::var("RQVS_BLESS_HEADER").as_deref() == Ok("1") {
        std::fs::write(&header, &fresh).expect("write include/rqvs.h");
        eprintln!("wrote {}", header.display());
        return;
    }
    let committed = std::fs::read_to_string(&header).unwrap_or_default();
    if committed != fresh {
        let first = committed.lines().zip(fresh.lines()).position(|(a, b)| a != b);
        panic!(
            "include/rqvs.h is not what cbindgen makes of crates/capi now (first difference at line {}); \
             regenerate it with:\n    RQVS_BLESS_HEADER=1 cargo test --release -p rqvs-capi --test header\nand commit it",
            first.map_or_else(|| "the end".to_string(), |i| (i + 1).to_string())
        );
    }
}
