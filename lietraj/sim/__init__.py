"""The MuJoCo plant: a MuJoCo model built from the robot's own URDF, state conversion both ways, pushes.

``build_mujoco_model`` compiles the model and its coordinate maps (``MujocoRobot``), ``MujocoPlant`` simulates it
with lietraj states in and out; ``mjcf_maps`` gives the maps of a robot read from MJCF by ``load_mjcf``. Imports
``lietraj.dynamics`` and ``mujoco`` only (DESIGN.md: a controller does not know which simulator runs it).
"""

from lietraj.sim.mujoco_model import MujocoRobot, UrdfEdits, build_mujoco_model, mjcf_maps
from lietraj.sim.mujoco_plant import MujocoPlant, SimulationDiverged

__all__ = ["MujocoPlant", "MujocoRobot", "SimulationDiverged", "UrdfEdits", "build_mujoco_model", "mjcf_maps"]
