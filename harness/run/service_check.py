"""Checks of the services a run talks to, before any model or file is loaded: the PostgreSQL cache URL's
parameters and a vLLM reader's engine settings and interpreter."""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig

from harness.cache.postgres import redacted
from harness.run.check_values import closest, select

# The reader class of the vLLM backend; older configs said ``backend: vllm`` instead.
VLLM_READER = "harness.read.vllm.VllmReader"


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
    """Whether a reader config builds a vLLM reader: its ``_target_`` or, in older configs, ``backend: vllm``."""
    if not isinstance(reader, DictConfig):
        return False
    return reader.get("_target_") == VLLM_READER or reader.get("backend") == "vllm"


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
    if bool(cfg.get("read", True)) and not found:
        python = given.get("python")
        try:
            vllm_python(str(python) if python else None)
        except VllmUnavailableError as error:
            # Its own message names the key or $HARNESS_VLLM_PYTHON; null tried every fall-back.
            where = "" if python or os.environ.get(PYTHON_ENV) else "reader.vllm.python=null: "
            found.append(f"{where}{error} (read=false needs no vLLM)")
    return found
