"""Visualization: Meshcat scenes of a robot, live or exported to HTML, and matplotlib plots of a solution.

    scene    RobotViewer: the Meshcat scene of a robot, its animations and their extras
    meshes   the robot's mesh files (STL, DAE, OBJ), read and repaired for three.js
    server   the live viewer on 127.0.0.1, updated while a solver iterates
    page     the browser page of meshcat's viewer and lietraj's script, for the server and the export
    html     self-contained HTML export and headless-Chromium screenshots
    plots    matplotlib plots of a solution (convergence, joints, CoM and feet, contact forces)
    closed_loop  a closed-loop run's plot (tick times, tracking, floor forces) and its HTML page with the plan's ghost

Importing ``lietraj.viz`` loads matplotlib, not meshcat (which imports IPython and zmq): ``RobotViewer``
is imported on first use, and ``export_html`` imports it when it builds its scene. ``lietraj`` itself never
imports ``lietraj.viz``.
"""

from lietraj.viz.closed_loop import export_closed_loop_html, plot_closed_loop, save_closed_loop_plot
from lietraj.viz.html import HeadlessChromium, export_html, save_html, screenshot
from lietraj.viz.plots import (
    contact_force_series,
    plot_com_and_feet,
    plot_contact_forces,
    plot_convergence,
    plot_joints,
    save_summary,
    summary_figure,
)

__all__ = ["HeadlessChromium", "RobotViewer", "contact_force_series", "export_closed_loop_html", "export_html",
           "plot_closed_loop", "plot_com_and_feet", "plot_contact_forces", "plot_convergence", "plot_joints",
           "save_closed_loop_plot", "save_html", "save_summary", "screenshot", "summary_figure"]


def __getattr__(name: str):
    """``RobotViewer`` imported on first use: its module imports meshcat."""
    if name == "RobotViewer":
        from lietraj.viz.scene import RobotViewer

        return RobotViewer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
