"""The recursive rigid-body algorithms (RNEA, CRBA, ABA, M⁻¹, hybrid and extended inverse dynamics), their
first- and second-order derivatives, and the geometric linearization."""
