"""rqvs's packet classifiers, traces and datapath experiments over numpy.

Headers (what ``classify`` takes) come in two forms:

- a ``uint32`` array of shape ``(n, 5)`` — ``nw_src, nw_dst, tp_src, tp_dst, nw_proto``, a
  ClassBench 5-tuple — up to ``(n, 11)`` with the next fields of :data:`FIELDS`
  (``tcp_flags, in_port, dl_type, vlan_tci, nw_tos, nw_frag``);
- a 1-D structured array with any of :data:`HEADER_DTYPE`'s fields (what :func:`read_trace`
  returns; ``dl_src``/``dl_dst`` are 48-bit MAC addresses as integers, the IPv6 addresses and
  ``nd_target`` 16 bytes each in network order, ``metadata`` 64 bits).

Fields not given take a ClassBench packet's values: ``in_port`` 1, ``dl_type`` 0x0800, the rest 0.
Rule ids come back as ``int64``, ``-1`` where no rule matches. The winner is the matching rule of
highest priority, then lowest id; in a ClassBench file line ``i`` of ``n`` is rule ``i`` with
priority ``n - i``.

Bad input raises ``OSError`` (a file that cannot be read or written), ``TypeError`` (a wrong
type or dtype) or ``ValueError`` (anything else), with the ``rqvs`` command line's one-line
message.
"""

from __future__ import annotations

import os
from typing import Union

import numpy as np

from ._rqvs import (
    CLASSIFIERS,
    FIELDS,
    Classifier,
    LiveNuevoMatch,
    __version__,
    compare,
    gen_attack,
    gen_rules,
    gen_trace,
    read_trace_columns,
    replay,
)

__all__ = [
    "CLASSIFIERS",
    "FIELDS",
    "HEADER_DTYPE",
    "Classifier",
    "LiveNuevoMatch",
    "__version__",
    "compare",
    "gen_attack",
    "gen_rules",
    "gen_trace",
    "read_trace",
    "replay",
]

#: Every header field, each in its own width (``dl_src``/``dl_dst``/``arp_sha``/``arp_tha``: 48-bit
#: MACs in a uint64; ``ipv6_src``/``ipv6_dst``/``nd_target``: 16 bytes in network order, as
#: ``ipaddress.IPv6Address(...).packed``). A structured array may hold any subset of them.
HEADER_DTYPE = np.dtype(
    [
        ("nw_src", np.uint32),
        ("nw_dst", np.uint32),
        ("tp_src", np.uint16),
        ("tp_dst", np.uint16),
        ("nw_proto", np.uint8),
        ("tcp_flags", np.uint16),
        ("in_port", np.uint32),
        ("dl_type", np.uint16),
        ("vlan_tci", np.uint16),
        ("nw_tos", np.uint8),
        ("nw_frag", np.uint8),
        ("dl_src", np.uint64),
        ("dl_dst", np.uint64),
        ("nw_ttl", np.uint8),
        ("metadata", np.uint64),
        ("ipv6_src", np.uint8, (16,)),
        ("ipv6_dst", np.uint8, (16,)),
        ("ipv6_label", np.uint32),
        ("nd_target", np.uint8, (16,)),
        ("arp_sha", np.uint64),
        ("arp_tha", np.uint64),
    ]
)
assert HEADER_DTYPE.names is not None and tuple(HEADER_DTYPE.names) == tuple(FIELDS)


def read_trace(path: Union[str, os.PathLike], in_port: int = 1) -> np.ndarray:
    """The packets of a ClassBench trace or a pcap/pcapng capture (told apart by content; plain
    or .xz) as a structured array of :data:`HEADER_DTYPE`, one element per packet.

    ClassBench packets carry their flags column (TCP flags; ICMP type and code in ``tp_src`` /
    ``tp_dst``), ``dl_type`` 0x0800 and no MACs; ``in_port`` is given to every packet. A file
    that cannot be read raises ``OSError``, a malformed one ``ValueError``.
    """
    columns = read_trace_columns(os.fspath(path), in_port)
    headers = np.empty(len(columns["nw_src"]), dtype=HEADER_DTYPE)
    for name in FIELDS:
        headers[name] = columns[name]
    return headers
