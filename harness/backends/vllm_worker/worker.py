"""vLLM's offline engine in a process of its own, run as a script by the interpreter of the venv that holds vLLM.

vLLM pins its own torch and transformers, so it is installed into a venv of its own (``make vllm-venv``) and
the harness is not importable there: this file uses the standard library and vLLM only. The reader
(:mod:`harness.backends.vllm`) starts it and speaks one JSON object per line:

- ``{"op": "start", "engine": {...}}``: build ``vllm.LLM(**engine)``; answers ``{"ok", "version", "seconds"}``.
- ``{"op": "generate", "prompt_token_ids": [[...], ...], "max_tokens": n, "seed": s}``: greedy completion
  of already-tokenized prompts; answers ``{"ok", "texts", "prompt_tokens", "cached_tokens"}``,
  ``cached_tokens`` being the prompt tokens each request found in the prefix cache.

A failure answers ``{"ok": false, "error", "traceback"}`` and the worker waits for the next request. End of
input ends the worker. Replies go to the stdout this process was started with; everything else that would
print there (vLLM's and its libraries' logs) is sent to stderr, so no log line can corrupt a reply.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback


def _start(engine: dict) -> tuple[object, dict]:
    import vllm  # pyright: ignore[reportMissingImports]  (vLLM is installed in its own venv only)

    began = time.perf_counter()
    llm = vllm.LLM(**engine)
    return llm, {"ok": True, "version": vllm.__version__, "seconds": time.perf_counter() - began}


def _generate(llm, request: dict) -> dict:
    from vllm import SamplingParams  # pyright: ignore[reportMissingImports]

    params = SamplingParams(
        temperature=0.0,  # greedy
        max_tokens=int(request["max_tokens"]),
        seed=int(request.get("seed", 0)),
        skip_special_tokens=True,
    )
    prompts = [{"prompt_token_ids": [int(t) for t in ids]} for ids in request["prompt_token_ids"]]
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return {
        "ok": True,
        "texts": [output.outputs[0].text for output in outputs],
        "prompt_tokens": [len(output.prompt_token_ids or []) for output in outputs],
        "cached_tokens": [int(getattr(output, "num_cached_tokens", None) or 0) for output in outputs],
    }


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    llm = None
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            if request["op"] == "start":
                llm, reply = _start(request["engine"])
            elif request["op"] == "generate":
                if llm is None:
                    raise RuntimeError("generate before start")
                reply = _generate(llm, request)
            else:
                raise ValueError(f"unknown op {request['op']!r}")
        except Exception as error:  # the reader raises it, naming the worker's log
            reply = {"ok": False, "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":  # vLLM's engine core starts in a child process that re-imports this file
    main()
