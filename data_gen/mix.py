"""Behaviour mixes of the scripted generators: a frozen dataclass of probabilities per task."""

from __future__ import annotations

import dataclasses
from typing import TypeVar

Mix = TypeVar("Mix")


def with_overrides(defaults: Mix, label: str, **overrides) -> Mix:
    """`defaults` with `overrides` applied (the dataclass re-validates them); an unknown name is
    a TypeError that lists the valid ones."""
    valid = {f.name for f in dataclasses.fields(defaults)}
    unknown = set(overrides) - valid
    if unknown:
        raise TypeError(f"unknown {label} mix parameter(s) {sorted(unknown)}; valid: {sorted(valid)}")
    return dataclasses.replace(defaults, **overrides)
