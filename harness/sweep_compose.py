"""Each sweep job's config composed once, not twice.

Hydra's sweeper composes every job's config to check a batch before it launches it
(``Sweeper.validate_batch_is_legal``), and the launcher then composes the same overrides again to run the
job: about 0.2 s each for this config tree, as much as a reader-free job's whole packing work. With
``compose_once()`` installed, a composition is kept from the check and handed to the launcher's first
request for the same master config and overrides; any other request composes as before. Launchers that
compose in the launching process (basic, joblib, submitit, ray) all gain.
"""

from __future__ import annotations

from typing import Any

from hydra._internal.config_loader_impl import ConfigLoaderImpl

_MARK = "_harness_compose_once"


def compose_once() -> None:
    """Wrap ``ConfigLoaderImpl.load_sweep_config`` (idempotent)."""
    original = ConfigLoaderImpl.load_sweep_config
    if getattr(original, _MARK, False):
        return
    # (id(master), overrides) -> (master, composed config): the master is held so its id stays its own.
    kept: dict[tuple[int, tuple[str, ...]], tuple[Any, Any]] = {}

    def load_sweep_config(self: ConfigLoaderImpl, master_config: Any, sweep_overrides: list[str]) -> Any:
        key = (id(master_config), tuple(sweep_overrides))
        held = kept.pop(key, None)
        if held is not None and held[0] is master_config:
            return held[1]
        composed = original(self, master_config, sweep_overrides)
        if held is None:
            # First request (the sweeper's check, which only looks at it): kept for the launcher.
            kept[key] = (master_config, composed)
        return composed

    setattr(load_sweep_config, _MARK, True)
    ConfigLoaderImpl.load_sweep_config = load_sweep_config  # type: ignore[method-assign]
