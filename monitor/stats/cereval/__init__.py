"""Cer-Eval: sequential certified means with stitched Bernstein radii and adaptive partitions.

Paper: Cer-Eval (Wang, Chen, Li, Xu). What lives here: the stitched Hoeffding / empirical
Bernstein radii and the sequential "Seq" interval (:mod:`.stitched_radii`), the partitioned
certified mean with the target-stratum rule of Algorithm 1 (:mod:`.certified_mean`), and the strata
themselves: fixed labels, judge-loss bins, the 1-NN partition of Algorithm 2 (:mod:`.partition`).

May import: numpy, the standard library and modules of this package; nothing else of certmon.
"""
