"""Serve a GGUF model with llama.cpp's own HTTP server (OpenAI-compatible ``/v1/completions``,
``/v1/chat/completions``, ``/health``), from the prebuilt ``xllamacpp`` wheel: no compiler, no download.

    python -m harness.backends.llama_server --model smollm2 --port 8080 --parallel 4
    python -m harness reader=openai_compat reader.base_url=http://127.0.0.1:8080/v1

``--model`` is a packaged offline model name (``smollm2``) or a path to a ``.gguf`` file. The server
runs until SIGTERM or SIGINT; it prints ``listening on URL`` once it accepts requests.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from pathlib import Path


def resolve_gguf(model: str) -> Path:
    path = Path(model)
    if path.suffix == ".gguf":
        if not path.is_file():
            raise FileNotFoundError(f"GGUF file {path} does not exist")
        return path
    from harness.backends.offline_models import gguf_path

    return gguf_path(model)


def build_params(gguf: Path, host: str, port: int, parallel: int, ctx_per_slot: int, threads: int, alias: str | None):
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(gguf)
    params.hostnames = [host]
    params.port = int(port)
    params.n_parallel = int(parallel)
    # llama.cpp divides one context between the slots; size it so each slot holds a whole prompt.
    params.n_ctx = int(ctx_per_slot) * int(parallel)
    params.cpuparams.n_threads = int(threads)
    params.cpuparams_batch.n_threads = int(threads)
    if alias:
        params.model_alias = alias
    return params


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a GGUF model over llama.cpp's OpenAI-compatible HTTP server.")
    parser.add_argument("--model", default="smollm2", help="offline model name or path to a .gguf file")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--parallel", type=int, default=4, help="decoding slots (concurrent requests)")
    parser.add_argument("--ctx-per-slot", type=int, default=2048, help="context tokens per slot")
    parser.add_argument("--threads", type=int, default=1, help="CPU threads for decoding and prompt processing")
    parser.add_argument("--alias", default=None, help="model name reported by /v1/models")
    args = parser.parse_args(argv)
    for field in ("port", "parallel", "ctx_per_slot", "threads"):
        if getattr(args, field) < (0 if field == "port" else 1):
            parser.error(f"--{field.replace('_', '-')} must be positive, got {getattr(args, field)}")

    import xllamacpp as xlc

    params = build_params(
        resolve_gguf(args.model), args.host, args.port, args.parallel, args.ctx_per_slot, args.threads, args.alias
    )
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    server = xlc.Server(params)  # loads the model and starts the HTTP threads
    print(f"listening on {server.listening_address}", flush=True)
    stop.wait()
    del server
    sys.stdout.flush()


if __name__ == "__main__":
    main()
