"""Many solves at once on Dask: ``solve_many`` solves a problem at every point of a parameter grid or list, on the
cores of this machine or on a cluster, into a table with one row per solve; ``run_sweep`` keeps such a batch in a
directory it can resume (``lietraj sweep``)."""

from lietraj.batch.grid import GridError, check_points, grid_points, parse_axis
from lietraj.batch.solves import BatchResult, connect, local_cluster, solve_many, solve_one
from lietraj.batch.sweep import SweepResult, read_table, run_sweep, summary_figure

__all__ = ["BatchResult", "GridError", "SweepResult", "check_points", "connect", "grid_points", "local_cluster", "parse_axis",
           "read_table", "run_sweep", "solve_many", "solve_one", "summary_figure"]
