"""The relevance weight of Maximal Marginal Relevance, shared by every stage that selects by MMR and by the
report that states it.

``diversifier=mmr``, the rule's inner MMR and ``packer=mmr`` (``harness.diversify.mmr``, ``harness.pack.mmr``)
default to the one ``DEFAULT_LAMBDA`` so that their rows are comparable; the report's footnotes quote it beside
the lambda each table's rows used. It lives here, beside the metrics, so that analysis code reads it without
importing a stage.
"""

from __future__ import annotations

#: relevance weight of every MMR in the harness unless a config says otherwise (1 = relevance only)
DEFAULT_LAMBDA = 0.7
