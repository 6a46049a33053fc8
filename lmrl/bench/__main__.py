"""`python -m lmrl.bench [NAME [ARGS]]`: every benchmark (each in its own process), or the one named."""

from __future__ import annotations

import importlib
import subprocess
import sys

from lmrl.bench import BENCHMARKS


def main(argv: list[str]) -> int:
    if not argv:
        for name in BENCHMARKS:
            print(f"== python -m lmrl.bench {name}", flush=True)
            # a fresh process per benchmark: peak memory and thread settings are its own
            code = subprocess.call([sys.executable, "-m", f"lmrl.bench.{name}"])
            if code:
                return code
        return 0
    name, rest = argv[0], argv[1:]
    if name in ("-h", "--help"):
        print(sys.modules["lmrl.bench"].__doc__)
        return 0
    if name not in BENCHMARKS:
        print(f"python -m lmrl.bench: unknown benchmark {name!r}; valid names: {', '.join(BENCHMARKS)} "
              "(none: run them all)", file=sys.stderr)
        return 2
    sys.argv = [f"python -m lmrl.bench {name}", *rest]
    importlib.import_module(f"lmrl.bench.{name}").main()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
