"""lietraj.viz's modules: importing the package, its plots or the CLI leaves meshcat (and the IPython and zmq
it imports) unloaded until a scene is built; the viewer page finds meshcat's viewer script without importing it.

Imports are checked in a fresh interpreter: this test session has loaded meshcat already.
"""

import subprocess
import sys
from pathlib import Path

import meshcat
import pytest

import lietraj.viz
from lietraj.viz.page import VIEWER_DIST
from lietraj.viz.scene import RobotViewer

HEAVY = ("meshcat", "IPython", "zmq")


def loaded_after(code: str) -> list[str]:
    """Which of ``HEAVY`` a fresh interpreter has imported after running ``code``."""
    report = f"import sys; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, check=True)
    return run.stdout.split()


def test_importing_viz_plots_or_cli_leaves_meshcat_unloaded():
    assert loaded_after("import lietraj.viz") == []
    assert loaded_after("from lietraj.viz import export_html, save_html, save_summary, screenshot") == []
    assert loaded_after("import lietraj.cli\nfrom lietraj.viz.plots import save_summary") == []


def test_robot_viewer_loads_meshcat_on_first_use():
    assert loaded_after("from lietraj.viz import RobotViewer") == list(HEAVY)
    assert lietraj.viz.RobotViewer is RobotViewer
    assert "RobotViewer" in lietraj.viz.__all__


def test_unknown_viz_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'Viewer'"):
        lietraj.viz.Viewer  # noqa: B018


def test_viewer_assets_found_without_importing_meshcat():
    assert VIEWER_DIST == Path(meshcat.viewer_assets_path()) / "dist"
    assert (VIEWER_DIST / "main.min.js").is_file()
