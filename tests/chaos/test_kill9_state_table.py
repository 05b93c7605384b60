"""kill -9 of a process committing to the state table: only whole commits survive, no orphan after vacuum."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from checkpoints.state import StateTable

pytestmark = pytest.mark.chaos

ROOT = Path(__file__).resolve().parents[2]


def orphans(path: Path) -> set[str]:
    """Data files on disk that the table does not reference."""
    active = {uri.rsplit("/", 1)[-1] for uri in DeltaTable(str(path)).file_uris()}
    return {p.name for p in path.glob("*.parquet")} - active


CHILD = """
import sys
sys.path.insert(0, sys.argv[2])
from checkpoints.state import StateTable

st = StateTable(sys.argv[1], "crash", 86400)
st.open()
batch = st.committed_batch() + 1
print("ready", flush=True)
while True:
    st.commit(batch, [f"b{batch}-{i}" for i in range(2000)])
    print("done", batch, flush=True)
    if batch % 4 == 3:
        st.maintain()
    batch += 1
"""


def test_kill9_leaves_whole_commits_only(tmp_path):
    seed = int.from_bytes(os.urandom(4), "little")
    rng = random.Random(seed)
    path = tmp_path / "state"
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    committed = -1
    for round_no in range(3):
        child = subprocess.Popen(
            [sys.executable, str(script), str(path), str(ROOT)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout.readline().strip() == "ready", f"seed {seed}"
        time.sleep(rng.uniform(0.05, 0.8))
        os.kill(child.pid, signal.SIGKILL)
        out, _ = child.communicate(timeout=30)
        assert child.returncode == -signal.SIGKILL
        done = [int(line.split()[1]) for line in out.splitlines() if line.startswith("done")]
        last_done = done[-1] if done else committed
        st = StateTable(str(path), "crash", 86400)
        st.open()
        committed = st.committed_batch()
        where = f"seed {seed}, round {round_no}, last printed {last_done}, committed {committed}"
        # the kill may land after the commit but before "done" was printed
        assert last_done <= committed <= last_done + 1, where
        keys = st.keys()
        assert len(keys) == len(set(keys)), where
        assert set(keys) == {f"b{b}-{i}" for b in range(committed + 1) for i in range(2000)}, where
        st.close()
    assert committed >= 0, f"seed {seed}: no batch committed in three rounds"
    st = StateTable(str(path), "crash", 86400)
    st.open()
    st.maintain()
    assert orphans(path) == set(), f"seed {seed}: orphan files after vacuum"
