"""The heap allocator of launched runs: tcmalloc where it is installed, glibc's malloc otherwise.

Training batches of varying shape (bucketed lengths, rollouts' KV caches) free and allocate tens of megabytes a
step.  glibc keeps the freed pages of its heap and counts them in the process's RSS, and page-faults memory back
in when it does return it: Guess My City's BC cell (4 x 256, 8,192-token batches, one process on one core) peaks at
4.8 GB under glibc and holds 2.0 GB under tcmalloc, at 1.35 s a step against 1.84 (docs/benchmarks.md).  An allocator
can only be chosen before a process starts, so the launchers (`launchers.sweep`, `launchers.curves`, the end-to-end
tests) put it in their children's `LD_PRELOAD` through `lmrl.dist.child_env`, and `make train` in its own.
`LMRL_ALLOCATOR=system` keeps glibc's; `LMRL_ALLOCATOR=/path/to/lib.so` preloads that library instead.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path

# Debian's libtcmalloc-minimal4 (`make install` installs it as root): tcmalloc without the profiler.
TCMALLOC_GLOBS = ("/usr/lib/*/libtcmalloc_minimal.so.4", "/usr/lib/libtcmalloc_minimal.so.4",
                  "/usr/local/lib/libtcmalloc_minimal.so.4")
# tcmalloc reports every allocation above 1 GiB on stderr by default; a large logits tensor is not news.
QUIET = {"TCMALLOC_LARGE_ALLOC_REPORT_THRESHOLD": str(1 << 40)}


def allocator_library(choice: str | None = None) -> str | None:
    """The library to preload: `choice` (default: $LMRL_ALLOCATOR) `system` -> None, a path -> that path (which
    must exist), unset or `tcmalloc` -> the installed tcmalloc, None when there is none."""
    choice = os.environ.get("LMRL_ALLOCATOR", "tcmalloc") if choice is None else choice
    if choice == "system":
        return None
    if choice != "tcmalloc":
        if not Path(choice).is_file():
            raise FileNotFoundError(f"LMRL_ALLOCATOR={choice}: no such library (use `tcmalloc`, `system` or a path "
                                    "to a malloc library's .so)")
        return choice
    for pattern in TCMALLOC_GLOBS:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    return None


def preload_env(env: dict, choice: str | None = None) -> dict:
    """`env` with the allocator library first in LD_PRELOAD (unchanged when there is none, or it is there)."""
    library = allocator_library(choice)
    if library is None:
        return env
    preloaded = [p for p in env.get("LD_PRELOAD", "").split(":") if p]
    if library not in preloaded:
        env = {**env, "LD_PRELOAD": ":".join([library, *preloaded])}
    return {**QUIET, **env}


if __name__ == "__main__":  # `make train`: `env $(python -m lmrl.allocator) python -m lmrl.train ...`
    current = {k: os.environ[k] for k in ("LD_PRELOAD", *QUIET) if k in os.environ}
    print(" ".join(f"{k}={v}" for k, v in preload_env(current).items()))
