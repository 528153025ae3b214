"""StratPPI: stratified prediction-powered means and the label allocation across strata.

Paper: StratPPI (Fisch et al.). What lives here: the stratified PPI++ mean with a per-stratum
lambda and traffic weights (:mod:`.estimator`) and the Neyman-like allocation of labels to strata
turned into per-stratum audit rates (:mod:`.allocation`).

May import: numpy, the standard library, modules of this package and
:mod:`monitor.stats.cereval` (the strata and the traffic-weighted mean it shares).
"""
