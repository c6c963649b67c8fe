"""The robot model (read-only data) and its loaders: URDF, MJCF (through MuJoCo's compiler), example-robot-data, a
builder for trees in code, conversion to and from Pinocchio's configurations."""
