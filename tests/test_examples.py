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


CODE_MODE = Path(__file__).parent.parent / "examples" / "code_mode.py"


def test_code_mode_example_fans_out_reads_then_writes_alone() -> None:
    done = subprocess.run(
        [sys.executable, str(CODE_MODE)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert 'run_code output: {"result": {"files": 3, "lines": 5}' in out
    timeline = out[out.index("timeline:") : out.index("audit trail")].splitlines()[1:-1]
    events = [line.split("ms  ")[1] for line in timeline if line.strip()]
    # all three reads start before any ends; the write comes after every read ended
    assert [e.split()[0] + " " + e.split()[-1] for e in events[:3]] == ["read starts"] * 3
    assert events[-1] == "write SUMMARY.txt"
    assert "call_1:code:5    exclusive write_file" in out
    assert "model messages: [{'role': 'user', 'content': 'Summarise the project.'}]" in out
    assert '"status": "error"' in out and "denied by the permission policy" in out
    assert done.stderr == ""
