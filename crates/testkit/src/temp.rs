//! [`TempDir`]: a test's own directory in the system temporary directory, removed when it is
//! dropped — at the end of the test, and also when the test fails (a panic unwinds through it).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// `rqvs-TAG-PID-N` in the system temporary directory, created empty; removed with everything
/// in it on drop. `N` counts the directories this process made, so tests running in parallel
/// in one binary never share one, whatever their tags.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("rqvs-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The path of `name` inside it.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::TempDir;

    #[test]
    fn removed_on_drop_also_after_a_panic() {
        let kept = TempDir::new("temp-test");
        let path = kept.join("f");
        std::fs::write(&path, b"x").unwrap();
        let inner = std::panic::catch_unwind(|| {
            let t = TempDir::new("temp-test");
            std::fs::write(t.join("g"), b"y").unwrap();
            let p = t.path().to_path_buf();
            assert_ne!(p, kept.0, "two directories, one name");
            panic!("{}", p.display());
        })
        .unwrap_err();
        let inner = std::path::PathBuf::from(inner.downcast_ref::<String>().unwrap());
        assert!(!inner.exists(), "{} left after a panic", inner.display());
        assert!(path.exists());
        let dir = kept.0.clone();
        drop(kept);
        assert!(!dir.exists());
    }
}
