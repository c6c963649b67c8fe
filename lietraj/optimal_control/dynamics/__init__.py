"""Discrete dynamics ``x⁺ = f(x, u)`` on the state group (continuous fields times integrators, discrete maps), their
Jacobians and DDP's second-order term."""
