"""Every shell command in README.md and docs/**/*.md is checked against the code, one test per command.

The commands are the lines of fenced ```bash / ```sh / ```shell / ```console blocks (in `console`, only the lines
after a `$ ` prompt), with `\\` continuations joined and `&&`, `||`, `;` and `|` chains split.  Each part is checked
without running anything that trains or writes:

- `make <target> [VAR=value ...]`: the target is a rule of the Makefile; `ARGS="..."` is checked as the arguments of
  the `python -m` line of the target's recipe that passes `$(ARGS)` on.
- `python -m <module> ...` where the module has `@hydra.main` (lmrl.train, lmrl.evaluate, lmrl.serve, ...): the
  overrides compose with the module's config (Hydra's compose API; with `-m`, enough runs of the sweep that every
  swept value is composed once), and an `algo` with a `_target_` passes its trainer's typed config
  (`lmrl.algos.base.typed_config`).
- `python -m <module> ...` with argparse (launchers.*, data_gen.*, lmrl.report, lmrl.bench <name>, ...): the module's
  own parser accepts the arguments (the module runs in this process until its parser returns, then stops; only a
  module that builds a parser, or imports a project module that does, is run).
  launchers.sweep also composes its experiment with the overrides (its --plan-only would write plan.json).
- `torchrun ... -m <module> ...` and `deepspeed ... --module <module> ...`: the launcher's own parser accepts its
  flags, and the module's arguments are checked as above.  `srun` / `sbatch` lines: the `python -m` command inside.
- `mkdocs ...`: mkdocs accepts the options (`--help` appended: click checks options first).
- `pytest ...` / `python -m pytest ...`: the paths exist and pytest knows the flags.

Leading `VAR=value` assignments and `env`, `time`, `nohup`, `nice`, `taskset` wrappers are stripped; `$VAR`,
`$(...)` and `<a placeholder>` become plain words, and redirections are dropped.  Set-up lines are skipped: `cd`,
`export`, `source`, `pip install`, `git clone`, `apt-get`, `mkdir`, `touch`, a bare `VAR=value`, and a few shell
utilities (`ls`, `head`, ...).

A line ending in `# not checked: <reason>` is skipped (the reason is shown); a line marked `# cheap` is also run,
from the repository root, and must exit 0.  Any other command fails with a message asking for that marker, so a page
cannot add a command nobody checks.  A page whose commands another test runs says so with
`<!-- commands: tests/<file>.py -->` (the tutorials: tests/test_tutorials.py), and that file must name the page's
file.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import io
import os
import re
import runpy
import shlex
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SHELLS = {"bash", "sh", "shell", "console"}
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*\{?\.?(?P<lang>[\w+-]*)")
NOT_CHECKED = re.compile(r"#\s*not checked:\s*(?P<reason>\S.*)$")
CHEAP = re.compile(r"#\s*cheap\b")
PAGE_RUNNER = re.compile(r"<!--\s*commands:\s*(?P<test>tests/\S+\.py)\s*-->")
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
MARKER_HINT = "add `# not checked: <reason>` at the end of the line if no check can apply"
# Set-up commands: nothing of the project's to check.
SETUP = ("cd", "export", "source", ".", "pip install", "pip3 install", "git clone", "apt-get", "sudo apt-get", "apt",
         "conda", "mkdir", "touch", "python -m venv", "python3 -m venv", "python -m pip install",
         "python3 -m pip install")
# Shell utilities seen in pipelines and look-ups (`ls -dt outputs/... | head -n 1`).
UTILITIES = {"ls", "head", "tail", "cat", "less", "tee", "grep", "wc", "sort", "echo", "jq", "column", "nvidia-smi",
             "watch", "du", "df", "find", "tree"}
WRAPPERS = {"env", "time", "nohup", "exec"}
PYTHONS = {"python", "python3", ".venv/bin/python", "$(PY)"}


@dataclass
class Command:
    page: str
    line: int
    text: str
    cheap: bool = False
    skip: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.line}"


class CheckError(AssertionError):
    pass


# -- collecting ---------------------------------------------------------------------------------------------------


def split_comment(line: str) -> tuple[str, str]:
    """(code, comment): a `#` outside quotes, at the start or after white space, starts the comment."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip(), line[i:]
    return line.rstrip(), ""


def shell_blocks(text: str):
    """(first line number, language, [lines]) of every fenced block in a Markdown text; indented fences too."""
    lines, i = text.splitlines(), 0
    while i < len(lines):
        opened = FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        indent, fence, body = len(opened["indent"]), opened["fence"], []
        i += 1
        while i < len(lines) and not re.match(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$", lines[i]):
            body.append(lines[i][indent:] if lines[i][:indent].isspace() else lines[i].lstrip())
            i += 1
        yield i - len(body) + 1, opened["lang"].lower(), body
        i += 1


def block_commands(page: str, start: int, lang: str, body: list[str]) -> list[Command]:
    """The commands of one block: prompts stripped (console), continuations joined, comments and heredocs skipped."""
    commands: list[Command] = []
    pending: list[tuple[int, str, str]] = []  # (line number, code, comment) of a command continued with `\`
    heredoc = None
    for offset, raw in enumerate(body):
        number = start + offset
        if heredoc is not None:
            heredoc = None if raw.strip() == heredoc else heredoc
            continue
        if lang == "console" and not pending:
            if not raw.lstrip().startswith("$ "):
                continue  # the command's output
            raw = raw.lstrip()[2:]
        code, comment = split_comment(raw)
        if not code.strip() and not pending:
            continue
        pending.append((number, code, comment))
        if code.endswith("\\"):
            continue
        text = " ".join(c.rstrip("\\").strip() for _, c, _ in pending)
        comments = " ".join(c for _, _, c in pending)
        found = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", text)
        heredoc = found.group(1) if found else None
        reason = NOT_CHECKED.search(comments)
        commands.append(Command(page, pending[0][0], text, bool(CHEAP.search(comments)),
                                reason["reason"] if reason else None))
        pending = []
    return commands


def collect() -> list[Command]:
    commands = []
    for path in PAGES:
        text, page = path.read_text(), str(path.relative_to(ROOT))
        if PAGE_RUNNER.search(text):
            continue  # test_pages_run_elsewhere_name_their_test
        for start, lang, body in shell_blocks(text):
            if lang in SHELLS:
                commands.extend(block_commands(page, start, lang, body))
    return commands


# -- classifying ---------------------------------------------------------------------------------------------------


def placeholders(text: str) -> str:
    """`$(...)`, `$VAR` / `${VAR}` and `<a placeholder>` become plain words (the checks need a value, not the
    shell's), and redirections (`> file`, `2>&1`) and a trailing `&` go."""
    text = re.sub(r"<[A-Za-z][^<>]*>", "PLACEHOLDER", text)
    text = re.sub(r"\$\((?!PY\))[^()]*\)", "SUBSTITUTED", text)
    text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", text)
    text = re.sub(r"(?<!\S)\d*(>>?|<)(&\d+|\s*[^\s&|;]+)", " ", text)
    return text.rstrip().removesuffix("&").rstrip()


def split_chain(text: str) -> list[str]:
    """`a && b || c ; d | e` -> its parts (operators outside quotes only)."""
    parts, current, quote, i = [], "", None, 0
    while i < len(text):
        ch = text[i]
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "&|;":
            parts.append(current)
            current = ""
            i += 2 if text[i:i + 2] in ("&&", "||") else 1
            continue
        current += ch
        i += 1
    return [p.strip() for p in parts + [current] if p.strip()]


def strip_wrappers(words: list[str]) -> list[str]:
    """Drop leading `VAR=value` assignments (or a `$(...)` that prints them, as in `env $(...) python ...`) and
    `env` / `time` / `nohup` / `nice` / `taskset` wrappers."""
    while words:
        if ASSIGNMENT.match(words[0]) or words[0] in WRAPPERS or words[0] == "SUBSTITUTED":
            words = words[1:]
        elif words[0] == "nice":
            words = words[3:] if words[1:2] == ["-n"] else words[1:]
        elif words[0] == "taskset":
            words = words[3:] if words[1:2] in (["-c"], ["--cpu-list"]) else words[2:]
        else:
            return words
    return words


def check_part(text: str) -> str:
    """Check one command of a chain; returns what was checked (raises CheckError)."""
    words = shlex.split(text)
    if all(ASSIGNMENT.match(w) for w in words):
        return "set-up"
    words = strip_wrappers(words)
    head = words[0] if words else ""
    plain = " ".join([Path(head).name, *words[1:]])  # `.venv/bin/pip install` is `pip install`
    if any(plain == s or plain.startswith(s + " ") for s in SETUP):
        return "set-up"
    if head in UTILITIES:
        return "shell utility"
    if head == "make":
        return check_make(words[1:])
    if head in PYTHONS and words[1:2] == ["-m"] and len(words) > 2:
        return check_module(words[2], words[3:])
    if head == "torchrun":
        return check_torchrun(words[1:])
    if head == "deepspeed":
        return check_deepspeed(words[1:])
    if head in ("srun", "sbatch"):
        return check_slurm(words)
    if head == "mkdocs":
        return check_mkdocs(words[1:])
    if head == "pytest":
        return check_pytest(words[1:])
    raise CheckError(f"no check knows this command ({head!r}): {MARKER_HINT}")


# -- make ----------------------------------------------------------------------------------------------------------


@functools.cache
def make_rules() -> dict[str, list[str]]:
    """Makefile rule -> its recipe lines."""
    rules: dict[str, list[str]] = {}
    current = None
    for line in (ROOT / "Makefile").read_text().splitlines():
        rule = re.match(r"^([A-Za-z0-9_.-]+(?:\s+[A-Za-z0-9_.-]+)*)\s*:(?!=)", line)
        if rule and not line.startswith("\t"):
            names = rule.group(1).split()
            current = names[0]
            for name in names:
                rules.setdefault(name, [])
        elif line.startswith("\t") and current:
            rules[current].append(line.strip())
        elif line.strip() and not line.startswith("#"):
            current = None
    return rules


def check_make(args: list[str]) -> str:
    targets = [a for a in args if not a.startswith("-") and "=" not in a] or ["help"]
    variables = dict(a.split("=", 1) for a in args if "=" in a and not a.startswith("-"))
    for target in targets:
        if target not in make_rules() or target.startswith("."):
            raise CheckError(f"`make {target}`: the Makefile has no target {target!r} "
                             f"(targets: {', '.join(sorted(t for t in make_rules() if not t.startswith('.')))})")
    if "ARGS" in variables:
        for target in targets:
            lines = [line for line in make_rules()[target] if "$(ARGS)" in line]
            if not lines:
                raise CheckError(f"`make {target}` ignores ARGS (no recipe line passes $(ARGS) on)")
            for line in lines:
                words = line.split()
                end = words.index("$(ARGS)")
                start = max(k for k in range(end) if words[k] == "-m") + 1
                fixed = [w for w in words[start + 1:end] if not w.startswith("$(")]
                check_module(words[start], fixed + shlex.split(variables["ARGS"]))
    return "make " + " ".join(targets)


# -- python -m -----------------------------------------------------------------------------------------------------


def module_source(module: str) -> str:
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        spec = None
    if spec is None or spec.origin is None:
        raise CheckError(f"`python -m {module}`: no such module")
    if spec.submodule_search_locations:  # a package runs its __main__
        main = Path(spec.origin).parent / "__main__.py"
        if not main.exists():
            raise CheckError(f"`python -m {module}`: a package without __main__.py")
        return main.read_text()
    return Path(spec.origin).read_text()


def check_module(module: str, args: list[str]) -> str:
    if module == "pytest":
        return check_pytest(args)
    if module == "lmrl.bench" and args and not args[0].startswith("-"):
        from lmrl.bench import BENCHMARKS

        if args[0] not in BENCHMARKS:
            raise CheckError(f"`python -m lmrl.bench {args[0]}`: no such benchmark ({', '.join(BENCHMARKS)})")
        module, args = f"lmrl.bench.{args[0]}", args[1:]
    source = module_source(module)
    hydra_main = re.search(r"@hydra\.main\((?P<args>[^)]*)\)", source)
    if hydra_main:
        return check_hydra(module, hydra_main["args"], args)
    if module == "lmrl.bench" and not args:
        return "python -m lmrl.bench (every benchmark)"
    if not uses_argparse(source):
        raise CheckError(f"`python -m {module}`: neither Hydra nor argparse: {MARKER_HINT}")
    namespace = parse_with_module_parser(module, args)
    if module == "launchers.sweep":
        check_sweep(namespace)
    return f"python -m {module} (argparse)"


def uses_argparse(source: str) -> bool:
    """The module builds an argparse parser, or one of the project's modules it imports does (data_gen.guess_city
    hands its command line to data_gen.question_games): only then is it safe to run until its parser returns."""
    if "ArgumentParser" in source:
        return True
    imported = []
    for package, names in re.findall(r"^(?:from|import)\s+((?:lmrl|data_gen|launchers)[\w.]*)(?:\s+import\s+(.+))?$",
                                     source, re.M):
        imported += [package, *(f"{package}.{name.strip()}" for name in names.strip("()").split(",") if name.strip())]
    return any("ArgumentParser" in own_source(name) for name in imported)


def own_source(name: str) -> str:
    """The text of module `name`'s own file ("" for a name that is not a module)."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a name imported from a module, not a module
        return ""
    return Path(spec.origin).read_text() if spec is not None and spec.origin else ""


class _Parsed(Exception):
    def __init__(self, namespace):
        super().__init__("parsed")
        self.namespace = namespace


def parse_with_module_parser(module: str, args: list[str]) -> argparse.Namespace:
    """Run `python -m module args` in this process until its top-level argparse parser returns, then stop it."""
    original_args, original_known = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args
    depth = [0]

    def parse_known_args(self, args=None, namespace=None):
        depth[0] += 1
        try:
            result = original_known(self, args, namespace)
        finally:
            depth[0] -= 1
        if depth[0] == 0:
            raise _Parsed(result[0])
        return result

    def parse_args(self, args=None, namespace=None):
        depth[0] += 1
        try:
            result = original_args(self, args, namespace)
        finally:
            depth[0] -= 1
        raise _Parsed(result)

    saved_argv, err = sys.argv, io.StringIO()
    argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = parse_args, parse_known_args
    sys.argv = [f"python -m {module}", *args]
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # runpy: the module was imported before (launchers.sweep)
            runpy.run_module(module, run_name="__main__", alter_sys=False)
    except _Parsed as parsed:
        return parsed.namespace
    except SystemExit as exit_:
        message = err.getvalue().strip().splitlines()
        raise CheckError(f"`python -m {module}` rejects its arguments: {message[-1] if message else exit_}") from None
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = original_args, original_known
        sys.argv = saved_argv
    raise CheckError(f"`python -m {module}` finished without parsing arguments with argparse: {MARKER_HINT}")


def check_sweep(namespace: argparse.Namespace) -> None:
    """launchers.sweep: the experiment exists, its overrides compose with it, `--only` parses."""
    from launchers import sweep

    experiment = namespace.experiment.removeprefix("+").removeprefix("experiment=")
    if experiment not in sweep.experiments():
        raise CheckError(f"launchers.sweep: no experiment {experiment!r} ({', '.join(sweep.experiments())})")
    try:
        sweep.parse_only(namespace.only)
    except SystemExit as err:
        raise CheckError(f"launchers.sweep: {err}") from None
    compose_checked(ROOT / "conf", "train", [f"+experiment={experiment}", *namespace.overrides], [])


# -- Hydra ---------------------------------------------------------------------------------------------------------

HYDRA_FLAGS_WITH_VALUE = {"-cd", "--config-dir", "-cn", "--config-name", "-cp", "--config-path", "-c", "--cfg",
                          "-p", "--package", "--experimental-rerun"}
HYDRA_FLAGS = {"-m", "--multirun", "--resolve", "--info", "-h", "--help", "--hydra-help", "-r", "--run"}


def check_hydra(module: str, decorator: str, args: list[str]) -> str:
    settings = dict(re.findall(r"(\w+)\s*=\s*['\"]([^'\"]*)['\"]", decorator))
    config_dir = (Path(module_source_path(module)).parent / settings.get("config_path", ".")).resolve()
    name, searchpath, multirun, overrides, i = settings.get("config_name"), [], False, [], 0
    while i < len(args):
        arg = args[i]
        flag, _, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if flag in HYDRA_FLAGS_WITH_VALUE:
            value = inline or (args[i + 1] if i + 1 < len(args) else "")
            i += 1 if inline else 2
            if flag in ("-cd", "--config-dir"):
                if not (ROOT / value).is_dir():
                    raise CheckError(f"{flag} {value}: no such directory (relative to the repository root)")
                searchpath.append(f"file://{(ROOT / value).resolve()}")
            elif flag in ("-cn", "--config-name"):
                name = value
            elif flag in ("-cp", "--config-path"):
                config_dir = (Path(module_source_path(module)).parent / value).resolve()
            continue
        if arg.startswith("-") and flag not in HYDRA_FLAGS:
            raise CheckError(f"`python -m {module}`: {arg} is not a Hydra flag")
        multirun |= flag in ("-m", "--multirun")
        if not arg.startswith("-"):
            overrides.append(arg)
        i += 1
    combos = sweep_combinations(overrides) if multirun else [overrides]
    for combo in combos:
        compose_checked(config_dir, name, combo, searchpath)
    return f"python -m {module} (Hydra, {len(combos)} composition{'s' * (len(combos) > 1)})"


def sweep_combinations(overrides: list[str]) -> list[list[str]]:
    """Enough runs of a multirun sweep that every swept value is composed once: run k takes value k of every sweep
    (cycling through the shorter ones), not the whole product."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except Exception as err:  # noqa: BLE001 - Hydra's parser raises its own kinds
        raise CheckError(f"overrides {' '.join(overrides)} do not parse ({err})") from None
    choices = [[f"{o.input_line.split('=', 1)[0]}={v}" for v in o.sweep_string_iterator()] if o.is_sweep_override()
               else [o.input_line] for o in parsed]
    runs = max((len(c) for c in choices), default=1)
    return [[c[k % len(c)] for c in choices] for k in range(runs)]


def module_source_path(module: str) -> str:
    return importlib.util.find_spec(module).origin


def compose_checked(config_dir: Path, name: str, overrides: list[str], searchpath: list[str]):
    """Compose `name` from `config_dir` with `overrides`; an `algo` with a trainer must pass its typed config."""
    from hydra import compose, initialize_config_dir
    from hydra.utils import get_class

    from lmrl.algos.base import typed_config

    if searchpath:
        overrides = [f"hydra.searchpath=[{','.join(searchpath)}]", *overrides]
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            cfg = compose(name, overrides=overrides, return_hydra_config=True)
        algo = cfg.get("algo")
        if algo is not None and "_target_" in algo:
            typed_config(get_class(algo._target_).config_class, algo)
    except Exception as err:  # noqa: BLE001 - Hydra, OmegaConf and the typed configs raise several kinds
        causes = [e for e in (err, err.__cause__) if e is not None and str(e).strip()]
        why = "; ".join(str(e).strip().splitlines()[0] for e in causes)
        raise CheckError(f"overrides {' '.join(overrides)} do not compose or validate "
                         f"({type(err).__name__}: {why})") from None
    return cfg


# -- launchers, mkdocs, pytest ----------------------------------------------------------------------------------------


def launched_module(runner: str, script: str, is_module: bool, rest: list[str]) -> str:
    if not is_module:
        raise CheckError(f"{runner} runs a script ({script}), not a module: {MARKER_HINT}")
    return f"{runner} + " + check_module(script, rest)


def check_torchrun(args: list[str]) -> str:
    from torch.distributed.run import get_args_parser

    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            parsed = get_args_parser().parse_args(args)
    except SystemExit:
        raise CheckError(f"torchrun rejects its flags: {err.getvalue().strip().splitlines()[-1]}") from None
    return launched_module("torchrun", parsed.training_script, parsed.module, parsed.training_script_args)


def check_deepspeed(args: list[str]) -> str:
    from deepspeed.launcher.runner import parse_args

    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            parsed = parse_args(args)
    except SystemExit:
        raise CheckError(f"deepspeed rejects its flags: {err.getvalue().strip().splitlines()[-1]}") from None
    return launched_module("deepspeed", parsed.user_script, parsed.module, parsed.user_args)


def check_slurm(words: list[str]) -> str:
    """The `python -m` command inside an srun line or an `sbatch --wrap "..."`; Slurm's own flags are not checked."""
    wrap = [w.split("=", 1)[1] if w.startswith("--wrap=") else words[k + 1]
            for k, w in enumerate(words) if w.startswith("--wrap")]
    inner = strip_wrappers(shlex.split(wrap[0])) if wrap else words
    for k, word in enumerate(inner):
        if word in PYTHONS and inner[k + 1:k + 2] == ["-m"] and len(inner) > k + 2:
            return f"{words[0]} + " + check_module(inner[k + 2], inner[k + 3:])
    raise CheckError(f"{words[0]}: no `python -m <module>` in the command: {MARKER_HINT}")


def check_mkdocs(args: list[str]) -> str:
    mkdocs = Path(sys.executable).parent / "mkdocs"
    done = subprocess.run([str(mkdocs), *args, "--help"], capture_output=True, text=True, timeout=60)
    if done.returncode:
        raise CheckError(f"mkdocs rejects {' '.join(args)}: {done.stderr.strip().splitlines()[-1]}")
    return "mkdocs " + " ".join(args)


@functools.cache
def pytest_flags() -> set[str]:
    help_text = subprocess.run([sys.executable, "-m", "pytest", "--help"], capture_output=True, text=True,
                               cwd=ROOT, timeout=120).stdout
    return set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", help_text))


def check_pytest(args: list[str]) -> str:
    for arg in args:
        if arg.startswith("-") and arg.split("=", 1)[0] not in pytest_flags():
            raise CheckError(f"pytest has no flag {arg}")
        path = arg.split("::", 1)[0]
        if not arg.startswith("-") and ("/" in path or path.endswith(".py")) and not (ROOT / path).exists():
            raise CheckError(f"pytest {arg}: no such file or directory")
    return "pytest"


# -- tests ---------------------------------------------------------------------------------------------------------


def check_command(command: Command) -> list[str]:
    checked = []
    for part in split_chain(placeholders(command.text)):
        try:
            checked.append(check_part(part))
        except CheckError as err:
            raise CheckError(f"{command.id}: `{part}`\n  {err}") from None
    return checked


def run_cheap(command: Command) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-c", command.text], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, f"{command.id}: `{command.text}` (# cheap) exited {done.returncode}:\n" \
                                 f"{(done.stdout + done.stderr)[-3000:]}"


COMMANDS = collect()


@pytest.mark.parametrize("command", COMMANDS, ids=[c.id for c in COMMANDS])
def test_documented_command_is_valid(command):
    if command.skip:
        pytest.skip(f"not checked: {command.skip}")
    check_command(command)
    if command.cheap:
        run_cheap(command)


def test_pages_run_elsewhere_name_their_test():
    for path in PAGES:
        found = PAGE_RUNNER.search(path.read_text())
        if found:
            runner = ROOT / found["test"]
            assert runner.exists(), f"{path.relative_to(ROOT)}: {found['test']} does not exist"
            assert path.name in runner.read_text(), f"{found['test']} does not name {path.name}"


def test_commands_are_collected_from_every_kind_of_block():
    page = "\n".join([
        "```bash", "make help  # a comment", "python -m lmrl.train \\", "    task=maze_po algo=bc", "```",
        "  ```console", "  $ make test", "  output line", "  ```", "```sh", "ls  # not checked: a reason", "```",
        "```python", "make not-a-shell-block", "```"])
    commands = [c for start, lang, body in shell_blocks(page) if lang in SHELLS
                for c in block_commands("page.md", start, lang, body)]
    assert [(c.line, c.text, c.skip) for c in commands] == [
        (2, "make help", None), (3, "python -m lmrl.train task=maze_po algo=bc", None), (7, "make test", None),
        (11, "ls", "a reason")]


def test_a_cheap_command_runs_and_must_succeed():
    run_cheap(Command("page.md", 1, "make help", cheap=True))
    with pytest.raises(AssertionError, match="exited 2"):
        run_cheap(Command("page.md", 1, "make no-such-target", cheap=True))


@pytest.mark.parametrize("text, message", [
    ("make no-such-target", "the Makefile has no target 'no-such-target'"),
    ("make train ARGS='algo=no_such_algo'", "Could not find 'algo/no_such_algo'"),
    ("python -m lmrl.train task=maze_fo algo.no_such_key=1", "Could not override 'algo.no_such_key'"),
    ("python -m lmrl.train algo=bc algo.steps=0", "steps must be >= 1"),
    ("python -m lmrl.train -m task=maze_fo,no_such_task", "Could not find 'task/no_such_task'"),
    ("python -m lmrl.report --no-such-flag", "rejects its arguments"),
    ("python -m lmrl.no_such_module", "no such module"),
    ("deepspeed --num_gpus 8 -m lmrl.train", "deepspeed rejects its flags"),
    ("torchrun --no-such-flag -m lmrl.train", "torchrun rejects its flags"),
    ("curl http://127.0.0.1:8000/v1/models", "# not checked: <reason>"),
])
def test_a_wrong_command_fails_naming_the_problem(text, message):
    with pytest.raises(CheckError, match=re.escape(message)):
        check_command(Command("page.md", 1, text))
