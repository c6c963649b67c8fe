"""Discrete dynamics ``x⁺ = f(x, u)`` on the state group, their Jacobians and DDP's second-order term."""
