"""Shared fixtures: the ClassBench data (found as crates/testkit finds it) and the `rqvs` binary.

- Data: ``$RQVS_CLASSBENCH_DIR``, else ``../shared/data/classbench`` beside the checkout. Tests
  that need it skip when it is absent, unless ``RQVS_REQUIRE_DATA=1`` (CI), where that fails.
- The command line (to compare messages and reports with): ``$RQVS_CLI``, else
  ``$CARGO_TARGET_DIR/release/rqvs`` or ``target/release/rqvs`` in the checkout. Tests that need
  it skip when it is absent, unless ``RQVS_REQUIRE_CLI=1`` (CI).
"""

from __future__ import annotations

import lzma
import os
import subprocess
from pathlib import Path
from typing import List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
SEEDS = ["acl1", "acl2", "acl3", "acl4", "acl5", "fw1", "fw2", "fw3", "fw4", "fw5", "ipc1", "ipc2"]


def _required(var: str) -> bool:
    return os.environ.get(var) == "1"


@pytest.fixture(scope="session")
def data() -> Path:
    d = Path(os.environ.get("RQVS_CLASSBENCH_DIR", REPO.parent / "shared" / "data" / "classbench"))
    if (d / "rules").is_dir():
        return d
    if _required("RQVS_REQUIRE_DATA"):
        pytest.fail(f"RQVS_REQUIRE_DATA=1 but the ClassBench data is not at {d}")
    pytest.skip(f"ClassBench data not found at {d} (set RQVS_CLASSBENCH_DIR)")


def rules_path(d: Path, seed: str, size: str) -> Path:
    return d / "rules" / f"{seed}_{size}.xz"


def trace_path(d: Path, seed: str, size: str) -> Path:
    return d / "traces" / f"{seed}_{size}_trace.xz"


def rule_lines(path: Path) -> List[str]:
    """The rule lines of a rule file (plain or xz), blank lines left out."""
    raw = path.read_bytes()
    if raw.startswith(b"\xfd7zXZ\x00"):
        raw = lzma.decompress(raw)
    return [line for line in raw.decode().splitlines() if line.strip()]


def _find_cli() -> Optional[Path]:
    if os.environ.get("RQVS_CLI"):
        return Path(os.environ["RQVS_CLI"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    p = target / "release" / "rqvs"
    return p if p.exists() else None


@pytest.fixture(scope="session")
def cli() -> Path:
    p = _find_cli()
    if p is not None and p.exists():
        return p
    if _required("RQVS_REQUIRE_CLI"):
        pytest.fail(f"RQVS_REQUIRE_CLI=1 but no rqvs binary at {p} (set RQVS_CLI)")
    pytest.skip("no rqvs binary (build it with cargo build --release, or set RQVS_CLI)")


def cli_error(cli: Path, *args: str, code: int = 1) -> str:
    """The one-line message of a failing `rqvs` run (exit code `code`: 1, or 2 for a usage
    error), without its `rqvs: error: `."""
    r = subprocess.run([str(cli), *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == code, f"rqvs {' '.join(args)} exited {r.returncode}: {r.stderr}"
    line = r.stderr.strip().splitlines()[-1]
    prefix = "rqvs: error: "
    assert line.startswith(prefix), line
    return line[len(prefix) :]
