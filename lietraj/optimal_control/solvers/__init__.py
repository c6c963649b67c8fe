"""The solvers: the Riccati backward pass and iLQR, DDP and FDDP around it, with their logs."""
