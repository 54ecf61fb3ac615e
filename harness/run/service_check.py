"""Checks of the services a run talks to, before any model or file is loaded: the PostgreSQL cache URL's
parameters, a reader config naming its class, a server reader's URLs, and a vLLM reader's engine settings
and interpreter."""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig, ListConfig

from harness.cache.postgres import redacted
from harness.run.check_values import closest, select

# The reader class of each backend: a reader config names it in ``_target_``.
READER_CLASSES = {
    "transformers": "harness.read.hf.TransformersReader",
    "llama_cpp": "harness.read.llama_cpp.LlamaCppReader",
    "vllm": "harness.read.vllm.VllmReader",
    "server": "harness.read.server.ServerReader",
}
VLLM_READER = READER_CLASSES["vllm"]


# libpq's connection parameters (PostgreSQL 17), the query parameters a postgresql:// URL may carry.
LIBPQ_PARAMETERS = (
    "host hostaddr port dbname user password passfile require_auth channel_binding connect_timeout "
    "client_encoding options application_name fallback_application_name keepalives keepalives_idle "
    "keepalives_interval keepalives_count tcp_user_timeout replication gssencmode sslmode sslnegotiation "
    "requiressl sslcompression sslcert sslkey sslpassword sslcertmode sslrootcert sslcrl sslcrldir sslsni "
    "requirepeer ssl_min_protocol_version ssl_max_protocol_version krbsrvname gsslib gssdelegation service "
    "target_session_attrs load_balance_hosts"
).split()
SSLMODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")


def url_problems(url: str, key: str = "cache.url") -> list[str]:
    """The query parameters of a postgresql:// URL that libpq would refuse, or ``sslmode`` values it
    would refuse at connection time, named with the key (the password masked)."""
    from urllib.parse import parse_qsl, urlsplit

    found = []
    for name, value in parse_qsl(urlsplit(url).query, keep_blank_values=True):
        if name not in LIBPQ_PARAMETERS:
            found.append(
                f"{key}={redacted(url)!r}: unknown connection parameter {name!r}; allowed: libpq's parameters "
                "(https://www.postgresql.org/docs/current/libpq-connect.html)" + closest(name, LIBPQ_PARAMETERS)
            )
        elif name == "sslmode" and value not in SSLMODES:
            found.append(
                f"{key}={redacted(url)!r}: sslmode={value!r} is not a mode; allowed: {', '.join(SSLMODES)}"
                + closest(value, SSLMODES)
            )
    return found


def is_vllm_reader(reader: Any) -> bool:
    """Whether a reader config builds a vLLM reader (by its ``_target_``)."""
    return isinstance(reader, DictConfig) and reader.get("_target_") == VLLM_READER


def reader_class_problems(cfg: DictConfig) -> list[str]:
    """A reader config written for the single reader class (``harness.read.reader.Reader`` with a ``backend``
    key), named with the class that replaces it, before Hydra fails to import the old one."""
    present, reader = select(cfg, "reader")
    if not present or not isinstance(reader, DictConfig):
        return []
    if "backend" not in reader and reader.get("_target_") != "harness.read.reader.Reader":
        return []
    backend = str(reader.get("backend", "transformers"))  # the single class's default backend
    what = f"reader.backend={backend!r}" if "backend" in reader else "reader._target_='harness.read.reader.Reader'"
    replacement = READER_CLASSES.get(backend)
    if replacement is None:
        allowed = ", ".join(f"{name}: {target}" for name, target in READER_CLASSES.items())
        return [f"{what}: readers name their class in reader._target_, not a backend; {allowed}"]
    remove = " and remove reader.backend" if "backend" in reader else ""
    return [
        f"{what}: readers name their class in reader._target_ and have no backend key; "
        f"set reader._target_={replacement}{remove}"
    ]


def server_url_problems(cfg: DictConfig) -> list[str]:
    """``reader.base_urls`` of a server reader: a non-empty list of distinct http(s) URLs, and not given
    together with ``reader.base_url`` (found before the retrieval stages, not at the first read)."""
    from urllib.parse import urlsplit

    present, urls = select(cfg, "reader.base_urls")
    if not present or urls is None:
        return []
    allowed = "a non-empty list of http:// or https:// URLs, one per server of the same model, or null"
    if not isinstance(urls, ListConfig) or not urls:
        return [f"reader.base_urls={urls!r} is not a list of URLs; allowed: {allowed}"]
    found = [
        f"reader.base_urls[{i}]={url!r} is not a URL; allowed: {allowed}"
        for i, url in enumerate(urls)
        if not (isinstance(url, str) and url.startswith(("http://", "https://")) and urlsplit(url).hostname)
    ]
    stripped = [str(url).rstrip("/") for url in urls]
    found += [f"reader.base_urls[{i}]={url!r} is listed twice" for i, url in enumerate(stripped) if url in stripped[:i]]
    if select(cfg, "reader.base_url")[1] is not None:
        found.append(
            "reader.base_url and reader.base_urls are both set; allowed: base_url for one server or base_urls for "
            "several (set reader.base_url=null, or use reader=openai_compat_servers)"
        )
    return found


def _reads_on_cuda(cfg: DictConfig) -> bool:
    from harness.core.devices import wants_cuda

    present, trainer = select(cfg, "reader.trainer")
    return bool(present and isinstance(trainer, DictConfig) and wants_cuda(trainer))


def vllm_problems(cfg: DictConfig) -> list[str]:
    """``reader.vllm`` of a vLLM reader: unknown settings, values the engine refuses, and an interpreter
    that does not exist (otherwise found only when the first prompt is read, after the retrieval stages)."""
    present, reader = select(cfg, "reader")
    if not present or not is_vllm_reader(reader):
        return []
    present, settings = select(cfg, "reader.vllm")
    if present and settings is not None and not isinstance(settings, DictConfig):
        return [f"reader.vllm={settings!r} is not a mapping; allowed: the engine's settings (reader.vllm.KEY=VALUE)"]
    from dataclasses import fields

    from harness.backends.vllm_setup import (
        PYTHON_ENV,
        VllmSettings,
        VllmUnavailableError,
        vllm_python,
    )

    given = {str(k): v for k, v in (settings or {}).items()}
    known = [f.name for f in fields(VllmSettings)]
    found = [
        f"unknown key 'reader.vllm.{name}'; allowed keys under reader.vllm: {', '.join(known)}"
        + closest(name, known, "reader.vllm.")
        for name in given
        if name not in known
    ]
    try:
        VllmSettings.from_mapping({k: v for k, v in given.items() if k in known})
    except (TypeError, ValueError) as error:
        found.append(f"reader.{error}")
    if given.get("batch_invariant") is True and not _reads_on_cuda(cfg):
        from harness.backends.vllm_setup import batch_invariant_mode

        try:
            batch_invariant_mode(True, [])
        except ValueError as error:
            found.append(str(error))
    if bool(cfg.get("read", True)) and not found:
        python = given.get("python")
        try:
            vllm_python(str(python) if python else None)
        except VllmUnavailableError as error:
            # Its own message names the key or $HARNESS_VLLM_PYTHON; null tried every fall-back.
            where = "" if python or os.environ.get(PYTHON_ENV) else "reader.vllm.python=null: "
            found.append(f"{where}{error} (read=false needs no vLLM)")
    return found
