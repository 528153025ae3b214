"""Many ``plugin_up`` e-processes vectorized over streams: now library code, re-exported here.

:class:`~monitor.stats.betting.plugin_batch.PlugInBatch` moved to :mod:`monitor.stats.betting`
so that the comparisons' vectorized twin can be the same class (issue 28).
"""

from __future__ import annotations

from monitor.stats.betting.plugin_batch import PlugInBatch

__all__ = ["PlugInBatch"]
