//! Writes the model loader's fuzz seeds (`model_file::fuzz_seeds`) to
//! `fuzz/corpus/model_loader` (or the directory given), for `cargo +nightly fuzz run model_loader`.

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "fuzz/corpus/model_loader".into());
    std::fs::create_dir_all(&dir)?;
    let seeds = rqvs_classify::nuevomatch::model_file::fuzz_seeds();
    for (i, s) in seeds.iter().enumerate() {
        std::fs::write(format!("{dir}/seed-{i}"), s)?;
    }
    println!("{} seeds in {dir}", seeds.len());
    Ok(())
}
