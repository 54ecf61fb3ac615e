"""Summary trees over long documents: none (dense baseline), RAPTOR and the query-driven DTCRS."""

# Trees summarise with a chat LM built from a config ``_target_`` (``harness.lm.base.build_chat_lm``): every
# backend in harness.lm is tree code (``harness.cache.stage_code``).
FINGERPRINT_ROOTS = ("harness.lm",)
