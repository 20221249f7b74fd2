"""Type stubs of the extension module (the Rust crate in python/src)."""

import os
from typing import Any, Dict, List, Optional, Sequence, Union

from typing_extensions import TypedDict, Unpack, final

import numpy as np
import numpy.typing as npt

_Path = Union[str, os.PathLike]
_Headers = npt.NDArray[Any]

__all__: List[str]
__version__: str
#: Header fields, in the column order of a plain uint32 headers array (its first 5 to 11).
FIELDS: List[str]
#: Classifier kinds ``Classifier`` builds.
CLASSIFIERS: List[str]

@final
class Classifier:
    """A packet classifier over rules. Lookups from several threads run at once (with the GIL
    released); an insert or remove waits for them."""

    @staticmethod
    def from_file(path: _Path, kind: str = "nmu") -> "Classifier":
        """Builds a classifier over a rule file (ClassBench or ovs-ofctl, plain or .xz).
        ``kind``: one of :data:`CLASSIFIERS`. OSError if unreadable, ValueError if malformed."""
    @staticmethod
    def from_rules(rules: Sequence[str], kind: str = "nmu") -> "Classifier":
        """Builds a classifier over rule lines, read as a rule file's lines."""
    @property
    def kind(self) -> str: ...
    def __len__(self) -> int: ...
    def memory_bytes(self) -> int:
        """Bytes the classifier's structures use (an estimate)."""
    def stats(self) -> Dict[str, float]:
        """Classifier-specific figures by name."""
    def classify(self, headers: _Headers) -> npt.NDArray[np.int64]:
        """The winning rule's id per packet, -1 where none matches (GIL released)."""
    def insert(self, rule: str, priority: Optional[int] = None, id: Optional[int] = None) -> int:
        """Adds one rule line (ClassBench or ovs-ofctl); returns its id (by default one past the
        largest so far). A ClassBench line gets priority 0 unless ``priority`` is given."""
    def remove(self, id: int) -> None:
        """Removes the rule with this id; KeyError when absent."""

@final
class LiveNuevoMatch:
    """NuevoMatchUP under updates, with a background trainer; a trained model is swapped in by
    the next call."""

    @staticmethod
    def from_file(path: _Path, policy: str = "instant", retrain_threshold: float = 0.1) -> "LiveNuevoMatch": ...
    @staticmethod
    def from_rules(rules: Sequence[str], policy: str = "instant", retrain_threshold: float = 0.1) -> "LiveNuevoMatch": ...
    def __len__(self) -> int: ...
    def classify(self, headers: _Headers) -> npt.NDArray[np.int64]: ...
    def insert(self, rule: str, priority: Optional[int] = None, id: Optional[int] = None) -> int: ...
    def remove(self, id: int) -> None: ...
    def poll(self) -> None:
        """Swaps in a trained model if one is ready; starts training if needed. Never waits."""
    def finish_training(self) -> None:
        """Waits until the training running now, if any, has been swapped in."""
    @property
    def training(self) -> bool: ...
    @property
    def coverage(self) -> float: ...
    @property
    def remainder_rules(self) -> int: ...
    @property
    def staged(self) -> int: ...
    @property
    def policy(self) -> str: ...
    def sessions(self) -> List[Dict[str, float]]: ...

class _CompareOptions(TypedDict, total=False):
    """The command line's replay options, ``_`` for ``-`` (defaults as there)."""

    passes: int  # 1
    duration: Optional[float]  # seconds of PMD time; excludes passes
    rate: Optional[float]  # packets per second into a ring of rx_ring
    rx_ring: int  # 4096
    updates: Optional[str]  # e.g. "add:60@7s,del:10@9s"
    verify: Optional[int]  # packets checked against the reference
    seed: int  # 1
    cd: bool  # False
    emc: bool  # True; False = --no-emc
    emc_prob: float  # 0.01
    emc_entries: int  # 8192; a power of two, 2 to 2097152
    flow_limit: int  # 200000
    revalidator: str  # "thread" or "inline"
    policy: str  # "instant" or "delayed"
    classifier: str  # CFLOWS: "nmu" or "tm" (TupleMerge alone)
    retrain_threshold: float  # 0.1
    train_interval: float  # 0.01
    idle: float  # 10.0
    in_port: int  # 1
    auto: Union[str, Dict[str, Union[str, float, bool]]]  # design auto's thresholds, e.g. {"window-ms": 50}

class _ReplayOptions(_CompareOptions, total=False):
    pmds: int  # 1

def replay(
    rules: Optional[_Path] = None,
    trace: Optional[_Path] = None,
    design: str = "orig",
    predict: str = "off",
    coflow_truth: Optional[_Path] = None,
    rate_search: bool = False,
    **options: Unpack[_ReplayOptions],
) -> Dict[str, Any]:
    """``rqvs replay --json``'s report as a dict (``predict``: ``--predict off|online|oracle``
    with ``coflow_truth``; ``rate_search``: ``--rate-search``)."""

def compare(
    rules: Optional[_Path] = None,
    trace: Optional[_Path] = None,
    designs: Sequence[str] = ("orig", "ccache", "cflows"),
    **options: Unpack[_CompareOptions],
) -> Dict[str, Any]:
    """``rqvs compare --json``'s report as a dict."""

def gen_rules(
    seed_file: str,
    count: int,
    output: _Path,
    *,
    rng_seed: int = 1,
    format: str = "classbench",
    addr_scope: float = 0.0,
    port_scope: float = 0.0,
    scale_skew: bool = True,
    smoothing: int = 0,
    compare: Optional[_Path] = None,
) -> Dict[str, Any]:
    """``rqvs gen rules -o OUTPUT --json``'s report as a dict (the rules are written to ``output``)."""

def gen_trace(
    rules: _Path,
    packets: int,
    output: _Path,
    *,
    locality: str = "pareto:1,0.1",
    rng_seed: int = 1,
    format: str = "classbench",
    corner: bool = False,
    max_share: float = 0.05,
    max_burst: Optional[int] = None,
) -> Dict[str, Any]:
    """``rqvs gen trace -o OUTPUT --json``'s report as a dict (the trace is written to ``output``)."""

def gen_attack(
    rules: _Path,
    kind: str,
    packets: int,
    output: _Path,
    *,
    variant: str = "co-located",
    masks: int = 64,
    rng_seed: int = 1,
) -> Dict[str, Any]:
    """``rqvs gen attack -o OUTPUT --json``'s report as a dict (the pcap is written to ``output``)."""

def read_trace_columns(path: _Path, in_port: int = 1) -> Dict[str, npt.NDArray[Any]]:
    """One array per field of :data:`FIELDS` (``rqvs.read_trace`` assembles them)."""
