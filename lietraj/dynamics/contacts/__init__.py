"""Rigid contacts: the contact-constrained forward dynamics and its derivatives, impulses at touchdown, the
linearization under contacts, quasi-static equilibrium."""
