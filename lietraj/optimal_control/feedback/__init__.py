"""Feedback on the Lie-algebra error: LQR and TVLQR, closed-loop simulation, the balancing LQR under contacts."""
