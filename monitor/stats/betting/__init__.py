"""Testing by betting: R-Eval, R-AutoEval, R-AutoEval+ and the hedged confidence sequences.

Paper: R-AutoEval+ (Park, Zecchin, Simeone), full text in the project's papers. What lives here:
bet rules (:mod:`.bets`), one-sided e-processes (:mod:`.eprocess`), PPI++ observations and the
mixture over reliance factors rho (:mod:`.autoeval`), one certificate of one model
(:mod:`.risk`) and all methods of a certificate in one computation (:mod:`.risk_group`), and the
two-sided confidence sequences on a grid of candidate means (:mod:`.confseq`,
:mod:`.confseq_group`, :mod:`.grid_wealth`, :mod:`.grid_batch`). ``ckernel.c`` is the optional
compiled twin of a ``plugin_up`` e-process's round, :mod:`.plugin_round` its Python reference;
``cedges.c`` computes the tables of :class:`~.confseq_bernstein_edges.IntervalNarrowing` (the same
decisions).

May import: numpy, the standard library and modules of this package; nothing else of certmon.
"""
