//! [`Kernel`]: which implementation of the model's arithmetic runs — the scalar definition or
//! one of its SIMD twins ([`crate::simd`]). Chosen once at run time ([`Kernel::active`]: the best
//! the CPU has, or the one `RQVS_KERNEL` names); every kernel can be asked for explicitly
//! ([`crate::RqRmi::lookup_batch_with`], [`crate::SubModel::eval_with`]) and answers
//! [`KernelUnavailable`] when the CPU lacks its instructions (as DPDK's `-ENOTSUP`). The rest of
//! rqvs never names an ISA.

use std::fmt;
use std::sync::OnceLock;

/// An implementation of the model's arithmetic. All give bit-identical results (tested).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// The definition ([`crate::SubModel::eval`]); every CPU.
    Scalar,
    /// x86-64 AVX2: one submodel's 8 hidden units in two 4-lane vectors.
    Avx2,
    /// x86-64 AVX-512F: a group's 8 keys in the lanes of one vector, parameters gathered.
    Avx512,
}

/// The environment variable that forces a kernel (`scalar`, `avx2`, `avx512`).
pub const KERNEL_ENV: &str = "RQVS_KERNEL";

/// A kernel the CPU cannot run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelUnavailable(pub Kernel);

impl fmt::Display for KernelUnavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "kernel {}: this CPU lacks its instructions (available: {})",
            self.0.name(),
            names(&Kernel::available())
        )
    }
}

impl std::error::Error for KernelUnavailable {}

fn names(ks: &[Kernel]) -> String {
    ks.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
}

impl Kernel {
    /// Every kernel, slowest first.
    pub const ALL: [Kernel; 3] = [Kernel::Scalar, Kernel::Avx2, Kernel::Avx512];

    pub fn name(self) -> &'static str {
        match self {
            Kernel::Scalar => "scalar",
            Kernel::Avx2 => "avx2",
            Kernel::Avx512 => "avx512",
        }
    }

    pub fn from_name(s: &str) -> Option<Kernel> {
        Kernel::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Whether this CPU can run the kernel (checked at run time).
    pub fn is_available(self) -> bool {
        match self {
            Kernel::Scalar => true,
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => crate::simd::avx2_available(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx512 => crate::simd::avx512_available(),
            #[cfg(not(target_arch = "x86_64"))]
            _ => false,
        }
    }

    /// The kernels this CPU can run, slowest first.
    pub fn available() -> Vec<Kernel> {
        Kernel::ALL.into_iter().filter(|k| k.is_available()).collect()
    }

    /// The fastest kernel this CPU can run (measured order: AVX-512 > AVX2 > scalar; see the
    /// crate docs for the figures).
    pub fn best() -> Kernel {
        Kernel::available().pop().unwrap_or(Kernel::Scalar)
    }

    /// The kernel `RQVS_KERNEL` asks for: `Ok(None)` when unset, an error naming the variable
    /// when it names no kernel or one this CPU lacks.
    pub fn from_env() -> Result<Option<Kernel>, String> {
        let Ok(v) = std::env::var(KERNEL_ENV) else { return Ok(None) };
        let k = Kernel::from_name(v.trim())
            .ok_or_else(|| format!("{KERNEL_ENV}={v}: expected one of {}", names(&Kernel::ALL)))?;
        if !k.is_available() {
            return Err(format!("{KERNEL_ENV}={v}: {}", KernelUnavailable(k)));
        }
        Ok(Some(k))
    }

    /// The kernel [`crate::RqRmi::lookup_batch`] uses: `RQVS_KERNEL`'s when it names one this
    /// CPU has, else [`Kernel::best`]. Decided once per process (callers that want a bad
    /// `RQVS_KERNEL` to be an error check [`Kernel::from_env`] first).
    pub fn active() -> Kernel {
        static ACTIVE: OnceLock<Kernel> = OnceLock::new();
        *ACTIVE.get_or_init(|| Kernel::from_env().ok().flatten().unwrap_or_else(Kernel::best))
    }
}
