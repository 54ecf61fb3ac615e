"""Budgeted-RAG evaluation harness."""

__version__ = "0.1.0"

try:  # the configs' ${harness_home:...} resolves wherever the configs are composed from
    from harness.core.home import register_resolver as _register_resolver

    _register_resolver()
except ImportError:  # an interpreter without omegaconf (a model worker) never composes a config
    pass
