"""The example the README's Quick start runs: it works, and shows the rule at work."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).parent.parent / "examples" / "batch_timeline.py"


def test_batch_timeline_example_runs_and_groups_calls_by_the_rule() -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    together = next(line for line in lines if line.startswith("what ran together"))
    # reads overlap, the write runs alone, the real delete runs alone, the unknown tool never runs
    assert together.endswith("[1 2]  ->  [3]  ->  [4 5 6 7]  ->  [8]")
    results = lines[lines.index("results, in the order the model emitted the calls:") + 1 :]
    assert [line.split()[0] for line in results] == [str(i) for i in range(1, 10)]
    assert "'charlie'" in results[3]  # the read after the write saw the write
    assert "error: unknown tool 'summarise'" in results[8]
    assert done.stderr == ""
