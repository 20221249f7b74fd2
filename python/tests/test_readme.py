"""The README's Python examples run as written (from the repository root)."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_readme_python_examples_run(monkeypatch):
    text = (REPO / "README.md").read_text()
    section = text[text.index("## Python (`python/`)"):]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert blocks, "no Python example in the README's Python section"
    monkeypatch.chdir(REPO)
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    assert os.path.exists("/tmp/rqvs-trace.txt")
