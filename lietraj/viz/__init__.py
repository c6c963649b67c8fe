"""Visualization: Meshcat scenes and animations of a robot (``meshcat_scene``: live in the browser, updated while a
solver iterates), self-contained HTML export and headless screenshots (``html``), and matplotlib plots of a solution
(``plots``).

Importing ``lietraj.viz`` loads meshcat and matplotlib (about a second); ``lietraj`` itself never imports it.
"""

from lietraj.viz.html import HeadlessChromium, export_html, save_html, screenshot
from lietraj.viz.meshcat_scene import RobotViewer
from lietraj.viz.plots import (
    contact_force_series,
    plot_com_and_feet,
    plot_contact_forces,
    plot_convergence,
    plot_joints,
    save_summary,
    summary_figure,
)

__all__ = ["HeadlessChromium", "RobotViewer", "contact_force_series", "export_html", "plot_com_and_feet",
           "plot_contact_forces", "plot_convergence", "plot_joints", "save_html", "save_summary", "screenshot",
           "summary_figure"]
