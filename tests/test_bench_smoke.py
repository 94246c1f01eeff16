"""The benchmark's agentlab and baseline parts run, for a few turns: a smoke check, not a speed test.

The figures themselves come from `make bench` (see benchmarks/bench.py); here
only that every part of it runs and prints its table, with no framework installed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_benchmark_runs_agentlab_and_the_baseline_and_prints_its_table() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/bench.py", "--quick", "--systems", "agentlab,baseline"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    for name in ("baseline", "agentlab"):
        assert re.search(rf"^{name} +[\d.,]+ +[\d.,]+ ", out, re.MULTILINE), f"no µs-per-turn row for {name}:\n{out}"
    for case in ("async model, ignores the signal", "sync tool, blocks its thread", "raw asyncio"):
        assert case in out
    assert re.search(r"^agentlab +[\d,]+ +[\d.,]+ MiB", out, re.MULTILINE), out  # import time and peak memory
    assert "50 loops at once" in out and "network attempts refused: 0" in out
    assert len(re.findall(r"^  (met   |MISSED)  ", out, re.MULTILINE)) == 8, out  # every target gets a verdict


def test_the_stall_benchmark_runs_each_sdk_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, "benchmarks/stall.py", "--runs", "2", "--timeout-ms", "100"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    for name in ("openai chat", "openai responses", "anthropic"):
        assert re.search(rf"^{name} +[\d.]+ +[\d.]+$", done.stdout, re.MULTILINE), done.stdout
