"""What the sweep scripts share: each run's JSON report kept on disk, so an interrupted sweep
resumes where it stopped and never keeps a partial report."""

import json
import os
import subprocess
import sys


def kept_json(path, cmd, ok_codes=(0,)):
    """The JSON report at `path`. Unless it is kept already, it is made first by `cmd` plus
    `--json PATH.tmp` (stdout discarded, stderr shown), and the temporary file is renamed to
    `path` only when the command exits with one of `ok_codes` and wrote it. Returns None (after
    saying why on stderr) when the command fails."""
    if not os.path.exists(path):
        tmp = path + ".tmp"
        full = [*cmd, "--json", tmp]
        print("+", " ".join(full), file=sys.stderr, flush=True)
        r = subprocess.run(full, stdout=subprocess.DEVNULL)
        if r.returncode not in ok_codes or not os.path.exists(tmp):
            print(f"failed (exit {r.returncode}): {' '.join(full)}", file=sys.stderr, flush=True)
            return None
        os.replace(tmp, path)
    with open(path) as f:
        return json.load(f)
