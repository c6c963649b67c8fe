"""The README runs as written: its ```python blocks, in order, in one namespace (as a reader pastes them into one
session), and the example script it teaches from (examples/custom_cost.py, in its --quick mode).

A block that must not run in CI (it opens a browser, serves Meshcat, ...) is marked in README.md by the line
``<!-- no-test: the reason -->`` right before its fence; it is reported as a warning, never skipped silently.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
LANGUAGES = ("python", "bash")
FENCE = re.compile(r"^```(\S*)\s*$")
NO_TEST = re.compile(r"^<!--\s*no-test:\s*(.*?)\s*-->$")


@dataclass
class Block:
    """A fenced code block of the README: the line of its opening fence (1-based), its language, its code, and the
    reason given by a ``no-test`` marker right before it (None: it runs)."""

    line: int
    language: str
    code: str
    no_test: str | None


def readme_blocks(text: str) -> list[Block]:
    lines = text.splitlines()
    blocks, previous, i = [], "", 0
    while i < len(lines):
        fence = FENCE.match(lines[i])
        if fence is None:
            previous = lines[i].strip() or previous
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```"), None)
        assert end is not None, f"README.md:{i + 1}: the code block is not closed"
        marker = NO_TEST.match(previous)
        blocks.append(Block(i + 1, fence.group(1), "\n".join(lines[i + 1:end]) + "\n",
                            None if marker is None else marker.group(1)))
        previous, i = "", end + 1
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))
PYTHON = [b for b in BLOCKS if b.language == "python"]


def test_readme_blocks_are_python_or_shell_and_markers_give_a_reason():
    """Every fenced block names its language (a ```py or unlabelled block would escape the run), and every
    ``no-test`` marker sits right before a python block and says why."""
    text = README.read_text(encoding="utf-8")
    for b in BLOCKS:
        assert b.language in LANGUAGES, f"README.md:{b.line}: code block in {b.language or 'no language'!r}"
    markers = len(re.findall(r"<!--\s*no-test", text))
    marked = [b for b in BLOCKS if b.no_test is not None]
    assert markers == len(marked), "a no-test marker is not right before a code block"
    for b in marked:
        assert b.language == "python" and b.no_test, f"README.md:{b.line}: no-test needs a python block and a reason"
    assert len(PYTHON) >= 7


def test_no_test_marker_applies_to_the_next_block_only():
    text = "intro\n\n<!-- no-test: opens a browser -->\n```python\nserve()\n```\n\n```python\nx = 1\n```\n"
    marked, plain = readme_blocks(text)
    assert (marked.line, marked.no_test, marked.code) == (4, "opens a browser", "serve()\n")
    assert (plain.line, plain.no_test, plain.code) == (8, None, "x = 1\n")


def test_readme_python_blocks_run_in_order(tmp_path, monkeypatch):
    """All python blocks, in order, in one namespace, in a scratch directory (they may write files)."""
    monkeypatch.chdir(tmp_path)
    namespace = {"__name__": "__main__"}
    for b in PYTHON:
        if b.no_test is not None:
            warnings.warn(f"README.md:{b.line}: python block not run ({b.no_test})", stacklevel=1)
            continue
        # blank lines before the code: a traceback names README.md and the block's own line numbers
        exec(compile("\n" * b.line + b.code, str(README), "exec"), namespace)


def test_custom_cost_example_runs(tmp_path):
    """examples/custom_cost.py --quick in a fresh process (the source tree on the path): it checks the gradient,
    solves the three forms, prints what they cost and writes its figure."""
    figure = tmp_path / "custom_cost.png"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               MPLBACKEND="Agg")
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "custom_cost.py"), "--quick", "--plot", str(figure)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    out = run.stdout
    assert out.count(": OK (tolerance") == 2 and "WRONG" not in out
    for line in ("plain function", "+ gradient", "+ gradient, Gauss-Newton Hessian", "built-in residual",
                 "giving the gradient:"):
        assert line in out, out
    assert figure.stat().st_size > 10_000


def test_the_robot_table_lists_what_the_registries_accept():
    """The README's table of robots per command says what ``PROBLEMS`` and ``SCENARIOS`` accept, no more, no less."""
    from lietraj.problems import PROBLEMS
    from lietraj.scenarios import SCENARIOS

    registries = {"solve": PROBLEMS, "mpc": SCENARIOS}
    rows = [line for line in README.read_text(encoding="utf-8").splitlines() if re.match(r"^\| `(solve|mpc) ", line)]
    listed = {}
    for row in rows:
        commands, robots = [cell.strip() for cell in row.strip("|").split("|")]
        for command in re.findall(r"`(\w+ \w+)`", commands):
            listed[command] = set(robots.split(", "))
    expected = {f"{kind} {name}": set(entry.robots) for kind, registry in registries.items()
                for name, entry in registry.items()}
    assert listed == expected
