"""What behaviour cloning can reach on a task's dataset: the data's own policy, read off as a table.

    python -m lmrl.tabular_bc task=text_nav_fo            # sampled (T = 1, the eval protocol) and greedy
    python -m lmrl.tabular_bc task=maze_fo task.eval.episodes_per_start=32

BC fits π(a | o), the dataset's distribution of actions given what the policy sees (the task's history
window).  Where observations repeat (the maze, Text-Nav), that distribution can be counted exactly: this
policy replays it, so its score under the task's evaluation protocol is what a BC model that fitted its
data perfectly would score — the ceiling of BC at the protocol's temperature, whatever the model size or
budget.  A data policy that is not Markov in the observation (Text-Nav's: each episode draws which rooms it
walks through, a latent the observation does not show) leaves BC a mixture of its modes.  The greedy policy
(the most frequent action per observation) shows what decoding at temperature 0 would do instead.

An observation the data never shows gets the most frequent action of the whole dataset (the share of such
turns is reported): a perfect fit knows nothing there either.
"""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

import hydra
from omegaconf import DictConfig

from lmrl.envs.base import Episode, History, history_window
from lmrl.evaluation import evaluate
from lmrl.task import Task


def state_key(history: Sequence, window: int | None) -> tuple[str, ...]:
    return tuple(t.text for t in history_window(history, window))


def count_actions(episodes: Iterable[Episode], window: int | None) -> dict[tuple[str, ...], Counter]:
    """{what the policy sees: Counter of the data's next action texts}."""
    table: dict[tuple[str, ...], Counter] = defaultdict(Counter)
    for episode in episodes:
        for i, turn in enumerate(episode.turns):
            if turn.is_action:
                table[state_key(episode.turns[:i], window)][turn.text] += 1
    return dict(table)


class TabularPolicy:
    """Acts from a table of counts: samples an action in proportion to its count, or (greedy) the most frequent.
    `unseen` / `turns` count the turns whose observation the table lacks."""

    def __init__(self, table: dict[tuple[str, ...], Counter], window: int | None, greedy: bool = False, seed: int = 0):
        self.table, self.window, self.greedy = table, window, greedy
        self.rng = random.Random(seed)
        overall = Counter()
        for counts in table.values():
            overall.update(counts)
        self.fallback = overall.most_common(1)[0][0]
        self.unseen = self.turns = 0

    def act(self, histories: Sequence[History]) -> list[str]:
        actions = []
        for history in histories:
            self.turns += 1
            counts = self.table.get(state_key(history, self.window))
            if counts is None:
                self.unseen += 1
                actions.append(self.fallback)
            elif self.greedy:
                actions.append(counts.most_common(1)[0][0])
            else:
                texts, weights = zip(*counts.items())
                actions.append(self.rng.choices(texts, weights)[0])
        return actions


def ceiling(task: Task, eval_cfg, seed: int = 0) -> dict:
    """{policy: metrics + unseen share} for the sampled and the greedy tabular policy on `task`'s dataset."""
    window = task.cfg.get("history_window")
    table = count_actions(task.episodes(), window)
    out = {"task": task.name, "states": len(table)}
    for name, greedy in (("sample", False), ("greedy", True)):
        policy = TabularPolicy(table, window, greedy=greedy, seed=seed)
        metrics, _ = evaluate(task, policy, eval_cfg, seed)
        out[name] = {**metrics, "unseen_share": policy.unseen / max(policy.turns, 1)}
    return out


@hydra.main(version_base="1.3", config_path="../conf", config_name="evaluate")
def main(cfg: DictConfig) -> dict:
    task = Task(cfg.task, cfg.cache_dir)
    out = ceiling(task, cfg.task.eval, cfg.seed)
    print(json.dumps(out, indent=2))
    for name in ("sample", "greedy"):
        m = out[name]
        print(f"{task.name} tabular BC ({name}): normalized {m['normalized_score']:.1f}, success "
              f"{m['success_rate']:.3f}, return {m['return_mean']:.3f}, {m['episodes']} episodes, unseen "
              f"observations {m['unseen_share']:.1%} of turns ({out['states']} distinct in the data)")
    return out


if __name__ == "__main__":
    main()
