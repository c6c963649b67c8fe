"""Residuals of the contact forces ``lambda(x, u)`` of the contact-constrained dynamics, for contact costs.

The forces are those of ``contact_dynamics(model, x, tau, contacts, damping)`` with ``tau = [0; u]`` (the floating
base is unactuated, ``u`` the joint torques, as in ``RobotDynamics``), stacked in contact order, each in its
contact's reference (``Contact.reference``), linear first: ``[f; n]`` (6d) or ``f`` (3d), at the frame origin.
Every residual here is a function ``r = g(lambda)`` of the stacked forces, so its Jacobians follow from
``contact_dynamics_derivatives`` by the chain rule::

    R_x = G [df_dq, df_dv],   R_u = G df_dtau[:, actuated columns],   G = dg/dlambda (nr, nc)

    ContactForceResidual      r = lambda − lambda_ref                          (nc,)   G = I
    FrictionConeResidual      r = A f ≤ 0   (facets m, inner approximation)    (m+1,)  G = [A 0]
                              r = √(f_x² + f_y² + ε²) − μ f_z ≤ 0  (facets=None)  (1,)
    CenterOfPressureResidual  r = [±n_y − l f_z; ±n_x − w f_z] ≤ 0              (4,)    G constant
    WrenchConeResidual        the facet rows of every contact and the CoP rows of every sole     G constant

Inequalities are written ``r ≤ 0``: use them with ``QuadraticBarrier(-inf, 0)`` (``barrier_activation``).

Normal direction. The cone and the sole are described in the axes the force is expressed in: the normal is the
``z`` axis of the contact's reference, i.e. the contact frame's ``z`` for ``reference="local"`` (a sole: ``z`` out of
the sole) and the world's ``z`` for ``"local_world_aligned"``. For point feet use ``"local_world_aligned"``: the
ground normal is then world ``z`` whatever the orientation of the foot frame (whose axes follow the shank). The
centre of pressure needs the sole axes, so it requires a 6d contact with ``reference="local"``; its rectangle
``[-l, l] × [-w, w]`` is centred at the contact frame origin, ``l`` along the frame's ``x`` (length), ``w`` along
``y`` (width). With ``p`` the centre of pressure, ``n = p × f_z e_z`` gives ``n_x = p_y f_z``, ``n_y = −p_x f_z``,
so ``|p_x| ≤ l ⇔ |n_y| ≤ l f_z`` and ``|p_y| ≤ w ⇔ |n_x| ≤ w f_z`` (which also force ``f_z ≥ 0``).

Linearized cone (Crocoddyl's ``FrictionCone`` with ``inner_appr=True``): the ``m`` facet rows are
``cos θ_j f_x + sin θ_j f_y − μ cos(π/m) f_z`` with ``θ_j = 2π j / m`` (the inscribed pyramid: a force satisfying
them is inside the exact cone), plus the unilateral row ``−f_z`` (``f_z ≥ 0``). Exact cone: ``‖f_t‖`` is not
differentiable at ``f_t = 0``, where the optimum of a cost often lies (no tangential force needed); it is
replaced by ``ρ = √(‖f_t‖² + ε²)``, smooth with gradient ``f_t / ρ`` bounded by 1. This is ``ε`` conservative
(``r ≤ 0`` needs ``μ f_z ≥ ρ > ‖f_t‖``) and makes ``f_z ≤ 0`` infeasible (``r ≥ ε > 0``), so it also enforces
unilaterality.

Costs of these residuals get a Gauss–Newton Hessian (``ResidualCost``): the contact forces are not affine in the
state. Each call evaluates the contact dynamics (and, for ``derivatives``, their derivatives) at every knot, unless
the residual is given the ``dynamics`` (a ``ContactRobotDynamics`` of the same model and damping, whose
``contacts`` it was built with) of the knots it is evaluated at: ``derivatives`` then takes
``dynamics.contact_derivatives``, which the dynamics' own Jacobians have just computed at the same knots (one
contact-derivative evaluation per knot and iteration instead of two).
"""

from __future__ import annotations

import math
import operator
from typing import Sequence

import numpy as np

from lietraj.dynamics.contacts.contact_dynamics import Contact, contact_dynamics
from lietraj.dynamics.contacts.contact_dynamics_derivatives import contact_dynamics_derivatives
from lietraj.dynamics.model.model import RobotModel
from lietraj.dynamics.model.workspace import Workspace
from lietraj.optimal_control.costs.activations import QuadraticBarrier
from lietraj.optimal_control.dynamics.contact_robot_dynamics import ContactRobotDynamics
from lietraj.optimal_control.costs.residuals import Residual, ResidualDerivatives, _frame, reference_vectors

DEFAULT_CONE_EPSILON = 1e-3
"""Default ``ε`` (N) of the smoothed exact friction cone ``√(‖f_t‖² + ε²) − μ f_z``."""


def barrier_activation(nr: int) -> QuadraticBarrier:
    """``½ ‖max(r, 0)‖²``: the activation of the inequality residuals here (``r ≤ 0``)."""
    return QuadraticBarrier(np.full(nr, -np.inf), np.zeros(nr))


def _positive(value, what: str) -> float:
    if not (isinstance(value, (int, float, np.integer, np.floating)) and math.isfinite(value) and value > 0):
        raise ValueError(f"{what} must be a finite number > 0, got {value!r}")
    return float(value)


def pyramid_rows(mu: float, facets: int) -> np.ndarray:
    """(facets + 1, 3): the rows ``A f ≤ 0`` of the inscribed friction pyramid and the unilateral row ``−f_z``."""
    theta = 2.0 * np.pi * np.arange(facets) / facets
    A = np.zeros((facets + 1, 3))
    A[:facets, 0], A[:facets, 1] = np.cos(theta), np.sin(theta)
    A[:facets, 2] = -mu * math.cos(math.pi / facets)
    A[facets, 2] = -1.0
    return A


def sole_rows(half_length: float, half_width: float) -> np.ndarray:
    """(4, 6): the rows ``A [f; n] ≤ 0`` keeping the centre of pressure in the sole rectangle."""
    l, w = half_length, half_width
    # columns: f_x, f_y, f_z, n_x, n_y, n_z
    return np.array([[0, 0, -l, 0, 1, 0], [0, 0, -l, 0, -1, 0], [0, 0, -w, 1, 0, 0], [0, 0, -w, -1, 0, 0]],
                    dtype=np.float64)


class _ContactResidual(Residual):
    """``r = g(lambda(x, u))`` for the stacked contact forces ``lambda`` (module docstring); a subclass sets ``nr``
    and implements ``_map(F) -> (r (N, nr), G (N or 1, nr, nc))``. Without ``dynamics`` to share, it computes the
    forces in a workspace of its own."""

    uses_u = True

    def __init__(self, model: RobotModel, contacts: Sequence[Contact], damping: float = 0.0, dynamics=None):
        name = type(self).__name__
        if not isinstance(model, RobotModel):
            raise TypeError(f"{name}: model must be a RobotModel, got {type(model).__name__}")
        contacts = tuple(contacts)
        if not contacts:
            raise ValueError(f"{name}: at least one contact is needed")
        for c in contacts:
            if not isinstance(c, Contact):
                raise TypeError(f"{name}: contacts must be Contact objects, got {type(c).__name__}")
            _frame(model, c.frame, name)
        if not (isinstance(damping, (int, float, np.integer, np.floating)) and math.isfinite(damping)
                and damping >= 0.0):
            raise ValueError(f"{name}: damping must be a finite number >= 0, got {damping!r}")
        self.model, self.state_space, self.nu = model, model.state_space, model.n
        self.workspace = Workspace(model)
        self.contacts, self.damping = contacts, float(damping)
        self.offsets = np.cumsum([0] + [c.dim for c in contacts])
        self.nc = int(self.offsets[-1])
        if dynamics is not None and not (
                isinstance(dynamics, ContactRobotDynamics) and dynamics.model is model and dynamics.damping == self.damping
                and len(dynamics.contacts) == len(contacts) and all(a is b for a, b in zip(dynamics.contacts, contacts))):
            raise ValueError(f"{name}: dynamics must be a ContactRobotDynamics of the same model and damping whose "
                             "contacts are these (dynamics.contacts)")
        self.dynamics = dynamics
        self.reads_dynamics = dynamics is not None

    def _contact(self, contact_index) -> tuple[Contact, int]:
        """The contact ``contact_index`` and the offset of its force in the stacked forces."""
        try:
            i = operator.index(contact_index)
        except TypeError:
            raise ValueError(f"{type(self).__name__}: contact_index must be an integer, got {contact_index!r}") from None
        if not 0 <= i < len(self.contacts):
            raise ValueError(f"{type(self).__name__}: contact_index {i} is out of range for {len(self.contacts)} "
                             "contact(s)")
        return self.contacts[i], int(self.offsets[i])

    def _tau(self, U: np.ndarray) -> np.ndarray:
        tau = np.zeros((U.shape[0], self.model.nv))
        tau[:, self.model.nv - self.model.n:] = U
        return tau

    def _map(self, F: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def residual_of_forces(self, forces) -> np.ndarray:
        """``r`` (N, nr) for stacked contact forces ``forces`` (N, nc) given directly (no dynamics)."""
        F = np.asarray(forces, dtype=np.float64)
        if F.ndim != 2 or F.shape[1] != self.nc or not np.isfinite(F).all():
            raise ValueError(f"{self!r}: forces must be a finite array of shape (N, {self.nc}), got {F.shape}")
        return self._map(F)[0]

    def forces(self, X, U) -> np.ndarray:
        """The stacked contact forces ``lambda`` (N, nc) at every knot; with ``dynamics``, from its contact field,
        which answers at the knots of its last rollout or derivatives without solving again (a solver's trial cost
        follows the rollout of the trial)."""
        _, U = self._check(X, U)
        if self.dynamics is not None:
            return self.dynamics.field.solve(X, U)[1]
        return contact_dynamics(self.model, X, self._tau(U), self.contacts, self.damping, self.workspace).lagrangian

    def value(self, X, U) -> np.ndarray:
        return self._map(self.forces(X, U))[0]

    def derivatives(self, X, U) -> ResidualDerivatives:
        _, U = self._check(X, U)
        if self.dynamics is not None:
            d = self.dynamics.contact_derivatives(X, U)
        else:
            d = contact_dynamics_derivatives(self.model, X, self._tau(U), self.contacts, self.damping,
                                             workspace=self.workspace)
        r, G = self._map(d.forces)
        nv, n = self.model.nv, self.model.n
        R_x = np.concatenate([G @ d.df_dq, G @ d.df_dv], axis=2)
        R_u = G @ d.df_dtau[:, :, nv - n:]
        return ResidualDerivatives(r, R_x, np.ascontiguousarray(R_u))

    def _describe(self) -> str:
        return ", ".join(f"{c.frame!r} {c.kind}" for c in self.contacts)


class ContactForceResidual(_ContactResidual):
    """``r = lambda − reference`` (nc,): the stacked contact forces minus a reference (default 0; a vector (nc,) or
    an (N, nc) array to track, settable), for force regularization."""

    def __init__(self, model: RobotModel, contacts: Sequence[Contact], reference=None, damping: float = 0.0,
                 dynamics=None):
        super().__init__(model, contacts, damping, dynamics)
        self.nr = self.nc
        self.reference = reference

    @property
    def reference(self) -> np.ndarray:
        return self._reference

    @reference.setter
    def reference(self, reference) -> None:
        self._reference = reference_vectors(reference, self.nc, "ContactForceResidual")

    def __repr__(self) -> str:
        return f"ContactForceResidual({self.model.name!r}, {self._describe()})"

    def _map(self, F):
        ref = self._reference
        if ref.ndim == 2 and ref.shape[0] != F.shape[0]:
            raise ValueError(f"{self!r}: the reference has {ref.shape[0]} knots, X has {F.shape[0]}")
        return F - ref, np.eye(self.nc)[None]


class FrictionConeResidual(_ContactResidual):
    """The Coulomb friction cone ``‖f_t‖ ≤ μ f_z`` of contact ``contact_index`` (its force part for a 6d contact),
    as residuals ``r ≤ 0``: with ``facets`` = m ≥ 3 the linearized cone (m facet rows and the unilateral row
    ``−f_z``, nr = m + 1), with ``facets=None`` the smoothed exact cone ``√(f_x² + f_y² + ε²) − μ f_z`` (nr = 1,
    ``epsilon`` = ε > 0). The normal is ``z`` of the contact's reference (module docstring)."""

    def __init__(self, model: RobotModel, contacts: Sequence[Contact], contact_index: int, mu: float,
                 facets: int | None = 4, epsilon: float = DEFAULT_CONE_EPSILON, damping: float = 0.0, dynamics=None):
        super().__init__(model, contacts, damping, dynamics)
        self.contact, self.offset = self._contact(contact_index)
        self.contact_index = int(contact_index)
        self.mu = _positive(mu, "FrictionConeResidual: mu")
        self.epsilon = _positive(epsilon, "FrictionConeResidual: epsilon")
        if facets is not None:
            try:
                facets = operator.index(facets)
            except TypeError:
                raise ValueError(f"FrictionConeResidual: facets must be an integer >= 3 or None, got {facets!r}") from None
            if facets < 3:
                raise ValueError(f"FrictionConeResidual: facets must be an integer >= 3 or None, got {facets}")
            A = pyramid_rows(self.mu, facets)
            G = np.zeros((1, facets + 1, self.nc))
            G[0, :, self.offset:self.offset + 3] = A
            self.A, self._G = A, G
        self.facets = facets
        self.nr = 1 if facets is None else facets + 1

    def __repr__(self) -> str:
        kind = "exact" if self.facets is None else f"{self.facets} facets"
        return f"FrictionConeResidual({self.model.name!r}, {self.contact.frame!r}, mu={self.mu:g}, {kind})"

    def _map(self, F):
        f = F[:, self.offset:self.offset + 3]
        if self.facets is not None:
            return f @ self.A.T, self._G
        rho = np.sqrt(f[:, 0] ** 2 + f[:, 1] ** 2 + self.epsilon ** 2)
        G = np.zeros((F.shape[0], 1, self.nc))
        G[:, 0, self.offset] = f[:, 0] / rho
        G[:, 0, self.offset + 1] = f[:, 1] / rho
        G[:, 0, self.offset + 2] = -self.mu
        return (rho - self.mu * f[:, 2])[:, None], G


class CenterOfPressureResidual(_ContactResidual):
    """The centre of pressure of the 6d contact ``contact_index`` (``reference="local"``) inside the rectangle
    ``|p_x| ≤ half_length``, ``|p_y| ≤ half_width`` of its sole: ``r = [n_y − l f_z, −n_y − l f_z, n_x − w f_z,
    −n_x − w f_z] ≤ 0`` (4,), force and torque in the sole frame at its origin (module docstring)."""

    def __init__(self, model: RobotModel, contacts: Sequence[Contact], contact_index: int, half_length: float,
                 half_width: float, damping: float = 0.0, dynamics=None):
        super().__init__(model, contacts, damping, dynamics)
        self.contact, self.offset = self._contact(contact_index)
        self.contact_index = int(contact_index)
        if self.contact.kind != "6d" or self.contact.reference != "local":
            raise ValueError(f"CenterOfPressureResidual: contact {self.contact.frame!r} must be a 6d contact with "
                             f"reference='local' (the sole axes), got {self.contact.kind} {self.contact.reference!r}")
        self.half_length = _positive(half_length, "CenterOfPressureResidual: half_length")
        self.half_width = _positive(half_width, "CenterOfPressureResidual: half_width")
        A = sole_rows(self.half_length, self.half_width)
        G = np.zeros((1, 4, self.nc))
        G[0, :, self.offset:self.offset + 6] = A
        self.A, self._G, self.nr = A, G, 4

    def __repr__(self) -> str:
        return (f"CenterOfPressureResidual({self.model.name!r}, {self.contact.frame!r}, "
                f"{self.half_length:g} x {self.half_width:g})")

    def _map(self, F):
        return F[:, self.offset:self.offset + 6] @ self.A.T, self._G


class WrenchConeResidual(_ContactResidual):
    """Every contact's admissibility in one residual ``r = A lambda ≤ 0``: the linearized friction cone
    (``facets`` facet rows and the unilateral row, as ``FrictionConeResidual``) of each contact's force, and for
    each 6d contact listed in ``soles`` (frame -> ``(half_length, half_width)``; ``reference="local"``) the four
    centre-of-pressure rows of ``CenterOfPressureResidual``. One evaluation of the contact dynamics (and of their
    derivatives) serves all rows, which is why a problem with several contacts wants this rather than one cost per
    contact and per condition."""

    def __init__(self, model: RobotModel, contacts: Sequence[Contact], mu: float,
                 soles: dict | None = None, facets: int = 4, damping: float = 0.0, dynamics=None):
        super().__init__(model, contacts, damping, dynamics)
        self.mu = _positive(mu, "WrenchConeResidual: mu")
        if isinstance(facets, bool) or not isinstance(facets, (int, np.integer)) or facets < 3:
            raise ValueError(f"WrenchConeResidual: facets must be an integer >= 3, got {facets!r}")
        soles = {} if soles is None else dict(soles)
        unknown = set(soles) - {c.frame for c in self.contacts}
        if unknown:
            raise ValueError(f"WrenchConeResidual: soles given for frames without a contact: {sorted(map(str, unknown))}")
        cone = pyramid_rows(self.mu, int(facets))
        blocks = []
        for i, c in enumerate(self.contacts):
            o = int(self.offsets[i])
            rows = np.zeros((cone.shape[0], self.nc))
            rows[:, o:o + 3] = cone
            blocks.append(rows)
            if c.frame in soles:
                if c.kind != "6d" or c.reference != "local":
                    raise ValueError(f"WrenchConeResidual: the sole of {c.frame!r} needs a 6d contact with "
                                     "reference='local' (the sole axes)")
                hl, hw = soles[c.frame]
                rows = np.zeros((4, self.nc))
                rows[:, o:o + 6] = sole_rows(_positive(hl, "WrenchConeResidual: half_length"),
                                             _positive(hw, "WrenchConeResidual: half_width"))
                blocks.append(rows)
        self.A = np.vstack(blocks)
        self._G, self.nr = self.A[None], self.A.shape[0]
        self.soles = soles

    def __repr__(self) -> str:
        return f"WrenchConeResidual({self.model.name!r}, {self._describe()}, mu={self.mu:g}, {len(self.soles)} sole(s))"

    def _map(self, F):
        return F @ self.A.T, self._G
