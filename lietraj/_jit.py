"""How lietraj compiles its kernels (numba): the decorators every compiled function uses.

- ``kernel``: a function called from Python, or an algorithm's core that several kernels call (``rnea_core``,
  ``contact_dynamics_core``...). Compiled on its first call for the argument types it gets and cached on disk
  (``cache=True``); it releases the GIL (``nogil=True``), so that threads computing on one shared model run in
  parallel; it has no C-callback wrapper (``no_cfunc_wrapper``), which nothing calls and which costs compile
  time. A kernel that calls another loads it from the disk cache when it is there: a core is compiled once per
  machine, not once per process, so that the first ``trot`` after a first ``talos_reach`` (a new process) does
  not compile ABA and the contact dynamics again, and the worker of a first solve (``lietraj/warmup.py``) shares
  them with the command. Calls from compiled code must not pass constants: numba compiles a kernel again for each
  constant value it is called with (``helper`` does not).
- ``helper``: a function called only from compiled code. It is compiled as part of the kernels that call it,
  once per process and argument types, and LLVM inlines it where that pays. Called from Python (tests, or any
  code under ``NUMBA_DISABLE_JIT=1``) it runs as plain Python.
- ``blas_kernel``: a kernel that multiplies matrices with ``np.dot(A, B, out)`` (BLAS), which numba implements
  through its runtime; only the Riccati sweep.
- ``split_kernel``: a kernel whose knots are split in two halves that two threads compute inside the call
  (``numba.prange`` over the halves, on numba's threading layer: OpenMP where the machine has it), each half with
  its own work arrays (two arguments: numba passes no tuple of tuples to a parallel loop), for a solver's
  ``threads=2``. One call holds no interpreter lock while both threads compute, where two Python threads
  each calling a kernel on half the knots waited for each other's Python around every call (the solo12 trot's
  contact derivatives: 1.05 ms a tick on one thread, 1.44-2.14 ms of both threads' time on two). It is compiled on
  its first call only, so that a solve on one thread never pays its compile time. ``split_call`` calls one on two
  of numba's threads (a machine of many cores would wake them all for two halves), one call at a time: numba's
  fallback layer (workqueue, where OpenMP is missing) aborts the process when two threads launch parallel work at
  once. GNU OpenMP is not fork-safe: a process forked after a two-thread solve must not solve on two threads (numba
  stops it with a message); lietraj's worker processes, and Dask's, are spawned.

Kernels and helpers allocate nothing: every array they write comes from their caller (a workspace, or an output
the Python function allocated), and they are compiled without numba's reference-counting runtime (``_nrt=False``).
With the runtime, every array view (``S[k]``, ``W[i]``, a named tuple's fields) and every array passed to a helper
LLVM did not inline took an atomic increment and decrement of its parent's reference count: 16-25 % of the
dynamics kernels' time (perf), 0.78 against 0.38 us per knot for ur5's batched RNEA, 4.0 against 3.0 for Talos's
CRBA. Without it a view is a pointer and a shape. A kernel that allocates (``np.empty``, an array operation)
fails to compile with "Only accept returning of array passed into the function as argument": pass it the array.

Why not ``@njit`` for helpers: numba specialises a jitted function called from another one on the value of each
constant argument, so ``load3(W, i, 12)`` and ``load3(W, i, 18)`` were two compilations (``store3`` had 21), each
with its own Python wrapper and machine code. Why not ``inline="always"``: it inlines at numba's IR level and
re-types the callee at every call site. From an empty cache, ``lietraj solve talos_reach`` reached its first
iteration after 187 s with inlined helpers and after 88 s with these two decorators, at the same speed per
iteration (compile time is part of the speed a user sees).
"""

import threading

import numba
from numba import njit
from numba.extending import register_jitable

_OPTIONS = dict(nogil=True, no_cfunc_wrapper=True, _nrt=False)

kernel = njit(cache=True, **_OPTIONS)
blas_kernel = njit(cache=True, **{**_OPTIONS, "_nrt": True})
split_kernel = njit(cache=True, parallel=True, **_OPTIONS)

_split_lock = threading.Lock()


def split_call(split_kernel, *args):
    """``split_kernel(*args)`` on two of numba's threads, one such call at a time in the process."""
    with _split_lock:
        if numba.config.NUMBA_NUM_THREADS <= 2:
            return split_kernel(*args)
        previous = numba.get_num_threads()
        numba.set_num_threads(2)
        try:
            return split_kernel(*args)
        finally:
            numba.set_num_threads(previous)


def helper(function):
    """Register ``function`` for compiled callers (``register_jitable``: typed without literal specialisation)
    and return it unchanged for Python callers. The options equal the kernels', including the Python wrapper that
    a helper never uses: numba keys a helper's compilations on its caller's options, so a helper called both from
    kernels and from other helpers compiled twice for the same argument types while they differed. A cold
    ``talos_reach`` compiles 141 functions with the wrappers and 163 without, in about the same CPU time (95-97 s
    against 93-100 s, alternated runs): the wrappers cost what the duplicates did, and each function now has one
    compiled form."""
    return register_jitable(no_cpython_wrapper=False, **_OPTIONS)(function)
