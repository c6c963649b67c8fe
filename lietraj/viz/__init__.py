"""Visualization: matplotlib plots of a solution (``plots``); Meshcat scenes, animations and self-contained HTML
export follow (issue 7 of the tracker).

The plots import matplotlib when ``lietraj.viz`` is imported, never when ``lietraj`` is.
"""

from lietraj.viz.plots import (
    contact_force_series,
    plot_com_and_feet,
    plot_contact_forces,
    plot_convergence,
    plot_joints,
    save_summary,
    summary_figure,
)

__all__ = ["contact_force_series", "plot_com_and_feet", "plot_contact_forces", "plot_convergence", "plot_joints",
           "save_summary", "summary_figure"]
