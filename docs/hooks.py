"""Build-time rendering for the docs site (`mkdocs.yml` names this file under `hooks`).

Figures that live in committed files are rendered from those files when the site is built, so a page
cannot drift from the data it shows.  A page asks for them with HTML comments, which GitHub's
markdown view leaves invisible:

    <!-- include results/table2_small.md -->              a markdown file, verbatim (its first heading dropped)
    <!-- csv results/curves/maze_fo.csv task=maze_fo -->   a CSV as a table, rows filtered by column=value
    <!-- json results/bench/envs.json -->                 a JSON object as a table (an object of objects:
                                                          one row each; a flat object: key | value)
    <!-- json results/bench/foundation.json bc_train_step --> the same, for the value at a dotted key
    <!-- config conf/algo/bc.yaml -->                     a config file's top-level keys: key | default | the
                                                          comment above the key (its documentation)

Paths are relative to the repository root.  Every PNG under `results/` is published at the same
path in the site, so a page links `../results/curves/maze_fo.png` (relative to the page, as usual).
A directive naming a missing file or key fails the build, `--strict` or not.
"""
from __future__ import annotations

import csv
import json
import re
from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parent.parent
DIRECTIVE = re.compile(r"<!--\s*(include|csv|json|config)\s+(\S+)((?:\s+[^\s>]+)*)\s*-->")


class RenderError(RuntimeError):
    pass


def fmt(value) -> str:
    """A cell: floats to 4 significant digits, lists joined, pipes escaped."""
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, (list, tuple)):
        text = ", ".join(fmt(v) for v in value)
    elif isinstance(value, dict):
        text = ", ".join(f"{k}: {fmt(v)}" for k, v in value.items())
    elif value is None:
        text = ""
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def source(path: str, page: str) -> Path:
    file = ROOT / path
    if not file.is_file():
        raise RenderError(f"{page}: `{path}` does not exist (paths are relative to the repository root)")
    return file


def render_include(path: str, args: list[str], page: str) -> str:
    text = source(path, page).read_text()
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    # `[d ?] [stale: ...]`: two bracket groups side by side read as a reference link; escape the second.
    return re.sub(r"\] \[", r"] \\[", "\n".join(lines).strip())


def render_csv(path: str, args: list[str], page: str) -> str:
    with source(path, page).open(newline="") as f:
        rows = list(csv.DictReader(f))
    filters = dict(a.split("=", 1) for a in args if "=" in a)
    columns = [a for a in args if "=" not in a]
    rows = [r for r in rows if all(r.get(k) == v for k, v in filters.items())]
    if not rows:
        raise RenderError(f"{page}: `{path}` has no rows where {filters}")
    header = columns or [c for c in rows[0] if any(r[c] not in ("", None) for r in rows)]
    missing = [c for c in header if c not in rows[0]]
    if missing:
        raise RenderError(f"{page}: `{path}` has no column {missing}; it has {list(rows[0])}")

    def num(text):
        try:
            return float(text) if any(ch in text for ch in ".e") else int(text)
        except ValueError:
            return text
    return table(header, [[num(r[c]) for c in header] for r in rows])


def render_json(path: str, args: list[str], page: str) -> str:
    data = json.loads(source(path, page).read_text())
    for key in (args[0].split(".") if args else []):
        if not isinstance(data, dict) or key not in data:
            raise RenderError(f"{page}: `{path}` has no key `{args[0]}`")
        data = data[key]
    if isinstance(data, list) and data and all(isinstance(r, dict) for r in data):
        header = list(dict.fromkeys(k for r in data for k in r))
        return table(header, [[r.get(k) for k in header] for r in data])
    if isinstance(data, dict) and data and all(isinstance(v, dict) for v in data.values()):
        header = list(dict.fromkeys(k for v in data.values() for k in v))
        return table([""] + header, [[name] + [v.get(k) for k in header] for name, v in data.items()])
    if isinstance(data, dict):
        return table(["key", "value"], [[k, v] for k, v in data.items()])
    raise RenderError(f"{page}: `{path}` {args} is neither an object nor a list of objects")


def render_config(path: str, args: list[str], page: str) -> str:
    """Top-level keys of a YAML config with their values and the comment lines just above each; with a node
    name (`<!-- config conf/algo/sweet.yaml critic_stage -->`), the keys of that top-level node instead."""
    lines = source(path, page).read_text().splitlines()
    if args:
        lines = node_lines(lines, args[0], path, page)
    rows, comment = [], []
    for line in lines:
        if line.startswith("#"):
            comment.append(line.lstrip("#").strip())
        elif line and not line[0].isspace() and ":" in line and not line.startswith("-"):
            key, _, value = line.partition(":")
            value = value.split(" #")[0].strip() or "(a nested node: see the file)"
            if key not in ("defaults", "_target_") and not key.startswith("#"):
                rows.append([f"`{key}`", f"`{value}`", escape_html(" ".join(comment))])
            comment = []
        elif not line.strip():
            comment = []
    if not rows:
        raise RenderError(f"{page}: `{path}` has no top-level keys")
    return table(["key", "default", "what it does"], rows)


def escape_html(text: str) -> str:
    """`<` and `>` outside backtick spans as entities, so `<run>` in a comment is shown, not taken for a tag."""
    parts = text.split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;").replace(">", "&gt;") for i, p in enumerate(parts))


def node_lines(lines: list[str], node: str, path: str, page: str) -> list[str]:
    """The lines of top-level node `node`, dedented to the node's own indentation (ends at the next line that
    starts in the first column)."""
    try:
        start = next(i for i, line in enumerate(lines) if line.split("#")[0].rstrip() == f"{node}:")
    except StopIteration:
        raise RenderError(f"{page}: `{path}` has no top-level node `{node}`") from None
    body = []
    for line in lines[start + 1 :]:
        if line.strip() and not line[0].isspace():
            break
        body.append(line)
    indents = [len(line) - len(line.lstrip()) for line in body if line.strip()]
    if not indents:
        raise RenderError(f"{page}: `{path}`'s node `{node}` is empty")
    cut = min(indents)
    return [line[cut:] for line in body]


RENDER = {"include": render_include, "csv": render_csv, "json": render_json, "config": render_config}


def render(markdown: str, page: str) -> str:
    """Every directive in `markdown` replaced by what it names."""
    def one(match: re.Match) -> str:
        kind, path, rest = match.group(1), match.group(2), match.group(3).split()
        body = RENDER[kind](path, rest, page)
        return f"{body}\n\n<small>Rendered from `{path}` when the site was built.</small>"
    return DIRECTIVE.sub(one, markdown)


def on_page_markdown(markdown, page, config, files):
    return render(markdown, page.file.src_uri)


def on_files(files, config):
    """Publish the committed plots under results/ at the same path in the site."""
    for png in sorted((ROOT / "results").rglob("*.png")):
        uri = png.relative_to(ROOT).as_posix()
        if files.get_file_from_path(uri) is None:
            files.append(File.generated(config, uri, abs_src_path=str(png)))
    return files
