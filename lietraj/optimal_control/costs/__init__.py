"""Costs: residuals through activations, sums of terms, plain Python functions, and the derivative checker."""
