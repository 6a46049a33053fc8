"""The API reference keeps its docstrings: every class and function a `::: module` block of docs/api/*.md shows
has one, and so does every public method of the trainer, environment and engine classes it shows.

mkdocstrings renders the reference from the docstrings and silently leaves out what has none, so without this
test a new public function or an undocumented override would drop out of the docs unnoticed.  Fast tier: it
imports the documented modules and reads their source; no model is built and nothing trains."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
API_DOCS = ROOT / "docs" / "api"

# A `::: module.path` line and the indented lines after it (its `options:` block, if any).
BLOCK = re.compile(r"^::: *([\w.]+)[ \t]*(?:\n|\Z)((?:[ \t]+\S.*(?:\n|\Z))*)", re.M)

# Public methods of documented trainer, env and engine classes that may go without a docstring of their own, each
# with the reason: an override that only restates the contract its base class documents.
EXEMPT_METHODS = {
    "lmrl.algos.group_pg.GroupPGTrainer.load_round_state":
        "OnlineTrainer.load_round_state's contract; group PG has no per-round state (PPO's KL coefficient)",
}


def api_blocks() -> list[tuple[str, str, list[str] | None]]:
    """(page, module, its `members` option or None) for every `::: module` block of the API pages."""
    blocks = []
    for page in sorted(API_DOCS.glob("*.md")):
        for module, body in BLOCK.findall(page.read_text()):
            options = (yaml.safe_load(textwrap.dedent(body)) or {}).get("options", {}) if body.strip() else {}
            members = options.get("members")
            blocks.append((page.name, module, list(members) if isinstance(members, list) else None))
    return blocks


def is_public_definition(module: ModuleType, name: str, obj) -> bool:
    """A class or function defined in `module` (not imported into it) whose name does not start with `_`; a
    function may be wrapped (`functools.cache`)."""
    return (not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(inspect.unwrap(obj)))
            and getattr(obj, "__module__", None) == module.__name__)


def has_docstring(obj) -> bool:
    """Whether `obj` has a docstring of its own in the source.  A class's is read from its source, since
    dataclasses and named tuples fill `__doc__` with their signature when the class has none."""
    if inspect.isclass(obj):
        node = ast.parse(textwrap.dedent(inspect.getsource(obj))).body[0]
        return bool((ast.get_docstring(node) or "").strip())
    return bool((obj.__doc__ or "").strip())


def is_contract_class(cls) -> bool:
    """Trainers (a `config_class`), environments (a `TextEnv` subclass) and engines: the classes whose every
    public method is part of an interface another part of the code calls."""
    from lmrl.envs.base import TextEnv

    return hasattr(cls, "config_class") or issubclass(cls, TextEnv) or cls.__name__.endswith("Engine")


def public_methods(cls) -> dict[str, object]:
    """The public methods and properties `cls` defines itself (inherited ones are checked where defined)."""
    methods = {}
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        func = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
        if inspect.isfunction(func):
            methods[name] = func
    return methods


def missing_docstrings(module: ModuleType, members: list[str] | None,
                       exempt: dict[str, str] = EXEMPT_METHODS) -> list[str]:
    """Qualified names of the documented objects of `module` that lack a docstring (the module's own included),
    and of names its `members` list gives that the module does not define."""
    missing = [] if (module.__doc__ or "").strip() else [module.__name__]
    public = {name: obj for name, obj in vars(module).items() if is_public_definition(module, name, obj)}
    if members is not None:
        missing += [f"{module.__name__}.{name} (listed in members, not defined there)"
                    for name in members if name not in public]
        public = {name: obj for name, obj in public.items() if name in members}
    for name, obj in public.items():
        qualified = f"{module.__name__}.{name}"
        if not has_docstring(obj):
            missing.append(qualified)
        if inspect.isclass(obj) and is_contract_class(obj):
            missing += [f"{qualified}.{method}" for method, func in public_methods(obj).items()
                        if not has_docstring(func) and f"{qualified}.{method}" not in exempt]
    return missing


def test_every_api_page_documents_modules():
    pages = {page.name for page in API_DOCS.glob("*.md")} - {"index.md"}
    with_blocks = {page for page, _, _ in api_blocks()}
    assert pages and pages == with_blocks, f"API pages without a `::: module` block: {sorted(pages - with_blocks)}"


@pytest.mark.parametrize("page,module_name,members", api_blocks(), ids=lambda v: v if isinstance(v, str) else "")
def test_documented_module_has_docstrings(page, module_name, members):
    module = importlib.import_module(module_name)
    missing = missing_docstrings(module, members)
    assert not missing, (f"docs/api/{page} shows {module_name}, where these have no docstring (write one that says "
                         f"what it does and its contract, or add an exempt override to EXEMPT_METHODS with a "
                         f"reason): {missing}")


def test_exemptions_are_current():
    """Every exempt method still exists and still lacks a docstring (else the exemption is dropped)."""
    for qualified in EXEMPT_METHODS:
        module_name, cls_name, method = qualified.rsplit(".", 2)
        cls = getattr(importlib.import_module(module_name), cls_name)
        assert method in public_methods(cls), f"{qualified} is exempt but no longer defined"
        assert not has_docstring(public_methods(cls)[method]), f"{qualified} has a docstring now: drop its exemption"


def test_checker_finds_what_is_missing(tmp_path, monkeypatch):
    """The check itself can fail: a module with an undocumented function, dataclass and env method is caught."""
    (tmp_path / "planted_api.py").write_text(textwrap.dedent('''
        """A module."""
        from dataclasses import dataclass
        from lmrl.envs.base import TextEnv

        def documented():
            """Has one."""

        def bare():
            pass

        def _private():
            pass

        @dataclass
        class Config:
            steps: int = 1

        class PlantedEnv(TextEnv):
            """An env."""

            def reset(self, seed=None, options=None):
                """Documented."""

            def step(self, action):
                return None
        '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("planted_api")
    try:
        assert sorted(missing_docstrings(module, None, {})) == [
            "planted_api.Config", "planted_api.PlantedEnv.step", "planted_api.bare"]
        assert missing_docstrings(module, ["documented", "gone"], {}) == [
            "planted_api.gone (listed in members, not defined there)"]
        assert missing_docstrings(module, None, {"planted_api.PlantedEnv.step": "test"}) == [
            "planted_api.bare", "planted_api.Config"]
    finally:
        sys.modules.pop("planted_api", None)
