"""The registry of compiled kernels: each C module, its Python reference and where it is used.

Each hot loop with a C twin (built by ``setup.py`` when a compiler is present; optional) is
listed once here, with the Python function it must agree with and the module attributes
("sites") that hold the compiled function when it was built and the Python path otherwise.
``tests/test_kernels.py`` runs one differential test over this registry (each kernel against
its reference on random inputs, and whole runs with each kernel replaced by its reference),
and fails when a ``.c`` file or a ``setup.py`` extension is not registered.
:func:`kernel_status` says which kernels this install runs.

Examples
--------
>>> [k.module for k in KERNELS][-1]
'monitor.caudit'
>>> sorted(kernel_status()) == sorted(k.module for k in KERNELS)
True

Notes
-----
Guarantee: for kernels compared as ``"bits"`` the compiled function returns the same floats
and leaves the same values in its in-place arguments as the reference; for ``"decisions"``
(the mixture tables of ``cedges``, which are filters read with a margin) every decision taken
from the table is the reference's. Either way STATE.json, alerts and checkpoints do not
depend on whether a kernel was built (see ``docs/architecture.md``, "Compiled kernels").
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Literal

__all__ = ["KERNELS", "Binding", "Kernel", "kernel_status"]


@dataclass(frozen=True)
class Binding:
    """One compiled function: its name, its Python reference, and the attributes using it.

    ``reference`` and each of ``sites`` are ``"module:attribute"``; ``fallback`` is what the
    sites hold without the kernel (``"reference"``: the reference itself; ``"none"``: None,
    and the caller then runs ``reference``).
    """

    compiled: str
    reference: str
    sites: tuple[str, ...]
    fallback: Literal["reference", "none"] = "reference"


@dataclass(frozen=True)
class Kernel:
    """A compiled module: its C source, its functions, and how it must agree with Python."""

    module: str
    source: str
    bindings: tuple[Binding, ...]
    compare: Literal["bits", "decisions"]
    what: str


KERNELS: tuple[Kernel, ...] = (
    Kernel(
        "monitor.stats.changepoint.ckernel", "monitor/stats/changepoint/ckernel.c",
        (Binding("advance", "monitor.stats.changepoint.rounds:advance_py",
                 ("monitor.stats.changepoint.rounds:advance",
                  "monitor.stats.changepoint.detector:_advance_round")),),
        "bits", "one round of the e-detector components (views checked, totals)"),
    Kernel(
        "monitor.stats.betting.ckernel", "monitor/stats/betting/ckernel.c",
        (Binding("step", "monitor.stats.betting.plugin_round:step_py",
                 ("monitor.stats.betting.plugin_round:step", "monitor.stats.betting.plugin:step")),
         Binding("reliance", "monitor.stats.betting.plugin_round:reliance_py",
                 ("monitor.stats.betting.plugin_round:reliance",
                  "monitor.stats.betting.plugin:reliance")),
         Binding("worst_log_factors", "monitor.stats.betting.plugin_bounds:worst_log_factors_py",
                 ("monitor.stats.betting.plugin_bounds:worst_log_factors",
                  "monitor.stats.betting.plugin:worst_log_factors",
                  "monitor.stats.betting.plugin_switch:worst_log_factors")),
         Binding("add_worst_log_factors",
                 "monitor.stats.betting.plugin_bounds:add_worst_log_factors_py",
                 ("monitor.stats.betting.plugin_bounds:add_worst_log_factors",
                  "monitor.stats.betting.plugin:add_worst_log_factors"))),
        "bits", "one round of a plugin_up e-process's cells; running sums and reliance; the "
        "worst-case log factors of a pending label (audit order)"),
    Kernel(
        "monitor.stats.betting.cedges", "monitor/stats/betting/cedges.c",
        (Binding("mixtures",
                 "monitor.stats.betting.confseq_bernstein_edges:IntervalNarrowing._mixtures_numpy",
                 ("monitor.stats.betting.confseq_bernstein_edges:_compiled_mixtures",), "none"),),
        "decisions", "the mixture tables a Bernstein sequence's bound moves read "
                     "(IntervalNarrowing)"),
    Kernel(
        "monitor.caudit", "monitor/caudit.c",
        (Binding("uniform", "monitor.audit:audit_uniform_prefixed",
                 ("monitor.audit:audit_uniform_fast",
                  "monitor.state.audit_policy:audit_uniform_fast")),),
        "bits", "the audit uniform of a unit (OpenSSL's EVP SHA-256, the library hashlib calls)"),
)


def kernel_status() -> dict[str, bool]:
    """Return, for each registered kernel, whether this install imports its compiled module.

    Examples
    --------
    >>> all(isinstance(v, bool) for v in kernel_status().values())
    True
    """
    out = {}
    for k in KERNELS:
        try:
            importlib.import_module(k.module)
        except ImportError:
            out[k.module] = False
        else:
            out[k.module] = True
    return out
