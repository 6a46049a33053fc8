"""The tutorials under docs/contributing/ run as written: their files are written into an empty folder and their
commands run there, so a change to the code they build on breaks this test, not a reader.

How a page marks its parts (the convention of both tutorials):

- a fenced block with a title, e.g. ```` ```python title="higher_lower.py" ````, is a file: its body is written
  to that path, relative to the folder (mkdocs-material shows the title above the block);
- every ```` ```bash ```` block holds commands, run in page order from the folder with `bash -c` (the project's
  Python first on PATH, OMP_NUM_THREADS=1, offline), each of which must exit 0; `\\` continuations are joined and
  comment lines skipped.  The pages keep their commands cheap (`debug=smoke`);
- ```` ```text ```` and other untitled blocks are prose: not run.

The page says `<!-- commands: tests/test_tutorials.py -->`, so tests/test_doc_commands.py leaves its commands
to this file.  Beyond the exit codes, each test checks what its page claims: the new task flags a malformed
action as invalid instead of raising and its normalization anchors are the ones its script prints; the new
algorithm's loss ran (its `train/weight_max` is logged).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.e2e import ROOT, cli_env

PAGES = ROOT / "docs" / "contributing"
TITLED = re.compile(r'^```\w*\s+title="(?P<path>[^"]+)"\s*$')


def page_parts(page: Path) -> tuple[dict[str, str], list[str]]:
    """({path: text} of the titled blocks, [commands of the bash blocks]) of a tutorial page."""
    files, commands, lines, i = {}, [], page.read_text().splitlines(), 0
    while i < len(lines):
        titled, bash = TITLED.match(lines[i]), lines[i].strip() == "```bash"
        i += 1
        if not (titled or bash):
            continue
        body = []
        while lines[i].strip() != "```":
            body.append(lines[i])
            i += 1
        i += 1
        if titled:
            files[titled["path"]] = "\n".join(body) + "\n"
        else:
            code = "\n".join(body).replace("\\\n", " ")
            commands += [c.strip() for c in code.splitlines() if c.strip() and not c.strip().startswith("#")]
    return files, commands


def run_page(page: Path, folder: Path) -> dict[str, str]:
    """Write the page's files into `folder`, run its commands there; {command: its output}."""
    files, commands = page_parts(page)
    assert files and commands, f"{page.name}: no titled blocks or no bash commands found"
    for path, text in files.items():
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
        (folder / path).write_text(text)
    env = cli_env(folder / ".cache" / "lmrl", OMP_NUM_THREADS="1",
                  PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
                  PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    outputs = {}
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=folder, env=env, capture_output=True, text=True,
                              timeout=600)
        assert done.returncode == 0, f"{page.name}: `{command}` exited {done.returncode}:\n{done.stderr[-4000:]}"
        outputs[command] = done.stdout
    return outputs


def only_run(folder: Path, task: str, algo: str) -> Path:
    runs = list((folder / "outputs" / task / algo).iterdir())
    assert len(runs) == 1, runs
    return runs[0]


def import_from(folder: Path, name: str):
    spec = importlib.util.spec_from_file_location(f"tutorial_{name}", folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_add_a_task_runs_as_written(tmp_path):
    outputs = run_page(PAGES / "add-a-task.md", tmp_path)
    metrics = json.loads((only_run(tmp_path, "higher_lower", "bc") / "metrics.json").read_text())
    assert (metrics["task"], metrics["algo"], metrics["episodes"]) == ("higher_lower", "bc", 8)
    assert 0.0 <= metrics["invalid_rate"] <= 1.0
    # the anchors in the config are the ones the page's script prints
    printed = dict(re.findall(r"^(min|avg|max): (-?[\d.]+)$", outputs["python higher_lower.py"], re.M))
    assert outputs["python higher_lower.py"].strip() in (PAGES / "add-a-task.md").read_text()  # the page shows it
    config = yaml.safe_load((tmp_path / "my_conf/task/higher_lower.yaml").read_text())
    assert {k: float(v) for k, v in printed.items()} == config["normalization"]
    # malformed text is flagged invalid and costs a guess; it never raises
    env = import_from(tmp_path, "higher_lower").HigherLowerEnv(max_guesses=20)
    env.reset(options={"secret": 3})
    for action in ["", "guess", "guess 3", "guess 0\n", "guess 11\n", "GUESS 3\n", "guess 3\n\n", "\u00e9\n"]:
        result = env.step(action)
        assert result.info["invalid"] and result.reward == -1.0 and not result.terminated, action
    result = env.step("guess 3\n")
    assert not result.info["invalid"] and result.terminated and result.info["success"]


def test_add_an_algorithm_runs_as_written(tmp_path):
    run_page(PAGES / "add-an-algorithm.md", tmp_path)
    run = only_run(tmp_path, "maze_fo", "rwbc")
    metrics = json.loads((run / "metrics.json").read_text())
    assert (metrics["task"], metrics["algo"], metrics["episodes"]) == ("maze_fo", "rwbc", 8)
    logged = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    weights = [row["train/weight_max"] for row in logged if "train/weight_max" in row]
    assert weights and all(0.0 < w <= 20.0 for w in weights)


@pytest.mark.parametrize("page", ["add-a-task.md", "add-an-algorithm.md"])
def test_tutorial_pages_hand_their_commands_to_this_file(page):
    assert "<!-- commands: tests/test_tutorials.py -->" in (PAGES / page).read_text()
