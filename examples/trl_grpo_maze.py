"""GRPO from trl on lmrl's Maze, played through its Gymnasium env: every completion is a whole multi-turn episode.

trl's `GRPOTrainer` takes a `rollout_func(prompts, trainer)` that returns, per prompt, the prompt's token ids, the
completion's token ids and an `env_mask` (1 on tokens the model sampled, 0 on tokens the environment wrote), plus
any extra fields, which reach the reward functions as keyword arguments.  Here each prompt is the first observation
of a maze start cell; the rollout resets `lmrl/MazeFO-v0` there and, until the episode ends, picks a move with the
model, steps the env and appends the env's reply (`info["latest"]`) to the completion, masked out of the loss.  The
reward is the episode's return.  Every turn is chosen with the whole conversation so far as context, so the
sequence GRPO scores is exactly the one the model acted on.

A move is one of the env's `info["legal_actions"]`, drawn in proportion to the model's probability of its tokens
(as lmrl's reranking policies choose); `--free` samples the turn token by token instead, up to its newline.  A
randomly initialized model never writes a valid move on its own, so free turns all score the invalid-move penalty
and GRPO, which learns from differences within a group, gets no signal.  For the same reason the prompts are the
start cells the turn budget can reach the goal from.

The model is a 2-layer GPT-2 built from a config, with a byte-level BPE tokenizer trained on the env's own texts:
nothing is downloaded.  A few steps run on one CPU core in seconds:

    python examples/trl_grpo_maze.py --steps 4 --out /tmp/grpo_maze
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import gymnasium
import torch

import lmrl.gym  # noqa: F401 - registers lmrl/MazeFO-v0
from lmrl.envs.maze import distances_to_goal

ENV_ID = "lmrl/MazeFO-v0"


def start_prompts(env: gymnasium.Env, max_distance: int) -> dict[str, dict]:
    """First observation -> the reset options that give it, for every start cell at most `max_distance` moves
    from the goal."""
    distance = distances_to_goal()
    prompts = {}
    for options in env.unwrapped.eval_reset_options():
        if distance[tuple(options["init_position"])] > max_distance:
            continue
        obs, _ = env.reset(options=options)
        if obs in prompts:
            raise ValueError(f"two start states share the first observation {obs!r}: prompts must name their state")
        prompts[obs] = options
    return prompts


def env_corpus(env: gymnasium.Env, episodes: int = 50, seed: int = 0) -> list[str]:
    """Texts of random-legal episodes (observations and moves): the tokenizer's training corpus."""
    rng, texts = random.Random(seed), []
    for k in range(episodes):
        obs, info = env.reset(seed=seed + k)
        texts.append(info["latest"])
        done = False
        while not done:
            action = rng.choice(info["legal_actions"])
            obs, _, terminated, truncated, info = env.step(action)
            texts += [action, info["latest"]]
            done = terminated or truncated
    return texts


def tiny_model(corpus: list[str], seed: int = 0):
    """A random 2-layer GPT-2 and a 512-token byte-level BPE trained on `corpus` (a newline is its own token)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    from lmrl.models.factory import train_tokenizer

    torch.manual_seed(seed)
    tokenizer = train_tokenizer(corpus, vocab_size=512)
    tokenizer.padding_side = "left"  # trl pads prompts on the left
    config = GPT2Config(vocab_size=len(tokenizer), n_layer=2, n_embd=64, n_head=2, n_positions=1024,
                        bos_token_id=tokenizer.eos_token_id, eos_token_id=tokenizer.eos_token_id,
                        pad_token_id=tokenizer.pad_token_id)
    return GPT2LMHeadModel(config), tokenizer


def sample_turn(model, context: list[int], newline_id: int, max_new_tokens: int) -> tuple[list[int], list[float]]:
    """Sample one agent turn after `context`: tokens up to and including the first newline (at most
    `max_new_tokens`), with each token's sampling log-probability."""
    ids = torch.tensor([context])
    out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=True, top_k=0, top_p=1.0,
                         temperature=1.0, max_new_tokens=max_new_tokens, eos_token_id=newline_id,
                         pad_token_id=newline_id, output_scores=True, return_dict_in_generate=True)
    tokens = out.sequences[0, len(context):].tolist()
    logprobs = [torch.log_softmax(score[0].float(), -1)[t].item() for score, t in zip(out.scores, tokens)]
    if newline_id in tokens:
        cut = tokens.index(newline_id) + 1
        tokens, logprobs = tokens[:cut], logprobs[:cut]
    return tokens, logprobs


def choose_legal(model, context: list[int], candidates: list[list[int]], pad_id: int) -> tuple[list[int], list[float]]:
    """One of `candidates` (token ids of the legal turns) drawn with probability proportional to the model's
    probability of its tokens after `context`, and those tokens' log-probabilities."""
    seqs = [context + c for c in candidates]
    ids = torch.full((len(seqs), max(map(len, seqs))), pad_id)
    mask = torch.zeros_like(ids)
    for i, seq in enumerate(seqs):
        ids[i, :len(seq)], mask[i, :len(seq)] = torch.tensor(seq), 1
    logp = torch.log_softmax(model(input_ids=ids, attention_mask=mask).logits.float(), -1)
    # the token at position p is predicted by the logits at p - 1
    token_logps = [[logp[i, len(context) + j - 1, t].item() for j, t in enumerate(c)] for i, c in enumerate(candidates)]
    choice = torch.multinomial(torch.softmax(torch.tensor([sum(lp) for lp in token_logps]), 0), 1).item()
    return candidates[choice], token_logps[choice]


def make_rollout(env: gymnasium.Env, prompts: dict[str, dict], tokenizer, free: bool = False, max_new_tokens: int = 8):
    """trl's `rollout_func`: one whole episode per prompt, the env's text masked out of the loss; each turn one of
    the legal actions (`choose_legal`) or, with `free`, sampled token by token (`sample_turn`)."""
    newline_id = tokenizer.convert_tokens_to_ids(tokenizer.tokenize("\n"))[0]

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def rollout(batch_prompts: list[str], trainer) -> dict[str, list]:
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [], "env_return": []}
        model, was_training = trainer.model, trainer.model.training
        model.eval()  # no dropout while acting (the tiny model has none; a pretrained one may)
        with torch.no_grad():
            for prompt in batch_prompts:
                _, info = env.reset(options=prompts[prompt])
                prompt_ids, ids, logprobs, mask, total, done = encode(prompt), [], [], [], 0.0, False
                while not done:
                    if free:
                        tokens, token_logprobs = sample_turn(model, prompt_ids + ids, newline_id, max_new_tokens)
                    else:
                        candidates = [encode(a) for a in info["legal_actions"]]
                        tokens, token_logprobs = choose_legal(model, prompt_ids + ids, candidates,
                                                              tokenizer.pad_token_id)
                    action = tokenizer.decode(tokens)
                    ids, logprobs, mask = ids + tokens, logprobs + token_logprobs, mask + [1] * len(tokens)
                    if not action.endswith("\n"):  # cut at the budget: the turn ends with a newline, as lmrl's
                        action += "\n"             # policies end it, written by the env side (masked)
                        ids, logprobs, mask = ids + [newline_id], logprobs + [0.0], mask + [0]
                    _, reward, terminated, truncated, info = env.step(action)
                    reply = encode(info["latest"])
                    ids, logprobs, mask = ids + reply, logprobs + [0.0] * len(reply), mask + [0] * len(reply)
                    total, done = total + reward, terminated or truncated
                ids, logprobs, mask = ids + [tokenizer.eos_token_id], logprobs + [0.0], mask + [0]  # episode over
                for key, value in zip(out, (prompt_ids, ids, logprobs, mask, total)):
                    out[key].append(value)
        model.train(was_training)
        return out

    return rollout


def episode_return(completions, env_return, **_) -> list[float]:
    """GRPO's reward: the return of the episode the rollout played (forwarded from `rollout_func`)."""
    return list(env_return)


def train(steps: int = 4, out: str | Path = "outputs/trl_grpo_maze", max_turns: int = 4, generations: int = 4,
          prompts_per_step: int = 2, free: bool = False, seed: int = 0) -> dict:
    """Train the tiny model for `steps` GRPO steps; returns `{"log_history": trl's logs, "changed": whether the
    weights moved, "prompts": the start cells}` and writes it to `<out>/summary.json`."""
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    env = gymnasium.make(ENV_ID, overrides=[f"task.env.max_steps={max_turns}"])
    prompts = start_prompts(env, max_distance=max_turns)
    model, tokenizer = tiny_model(env_corpus(env), seed)
    before = [p.detach().clone() for p in model.parameters()]
    config = GRPOConfig(output_dir=str(out), max_steps=steps, num_generations=generations,
                        per_device_train_batch_size=generations * prompts_per_step, learning_rate=1e-3,
                        beta=0.0, logging_steps=1, seed=seed, report_to="none", save_strategy="no", bf16=False,
                        use_cpu=True, disable_tqdm=True)
    trainer = GRPOTrainer(model=model, reward_funcs=episode_return, args=config, processing_class=tokenizer,
                          train_dataset=Dataset.from_dict({"prompt": list(prompts)}),
                          rollout_func=make_rollout(env, prompts, tokenizer, free))
    trainer.train()
    changed = any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
    summary = {"log_history": trainer.state.log_history, "changed": changed,
               "prompts": [options["init_position"] for options in prompts.values()]}
    Path(out).mkdir(parents=True, exist_ok=True)
    (Path(out) / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4, help="GRPO optimizer steps")
    parser.add_argument("--out", default="outputs/trl_grpo_maze", help="trl's output dir; summary.json goes here")
    parser.add_argument("--max-turns", type=int, default=4, help="maze moves per episode (the env's max_steps)")
    parser.add_argument("--generations", type=int, default=4, help="episodes per start cell (GRPO's group size)")
    parser.add_argument("--free", action="store_true", help="sample turns token by token, not among the legal moves")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    summary = train(args.steps, args.out, args.max_turns, args.generations, free=args.free, seed=args.seed)
    for row in summary["log_history"]:
        if "reward" in row:
            print(f"step {row['step']}: mean return {row['reward']:.2f} (std {row['reward_std']:.2f}), "
                  f"loss {row['loss']:.4f}")


if __name__ == "__main__":
    main()
