"""Train Stable-Baselines3 PPO and DQN on CartPole for a few thousand steps, logging to stdout
and to `progress.csv`, and keep a copy of `progress.csv` after each of the logger's dumps.

Usage: python gen_sb3.py OUT_DIR

SB3's CSV writer rewrites the whole file, header first, when a dump brings keys the header
lacks (PPO's first dump has no `train/` keys; DQN's first ones none before `learning_starts`):
the copies `progress.csv.N` show the file as a follower saw it after dump N.
"""

from __future__ import annotations

import os
import shutil
import sys

from stable_baselines3 import DQN, PPO
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.logger import configure


class KeepCopies(BaseCallback):
    """Copies `progress.csv` at each rollout start: after the previous iteration's dump."""

    def __init__(self, folder: str) -> None:
        super().__init__()
        self.folder = folder
        self.copies = 0

    def _on_rollout_start(self) -> None:
        path = os.path.join(self.folder, "progress.csv")
        if os.path.exists(path) and os.path.getsize(path):
            self.copies += 1
            shutil.copy(path, f"{path}.{self.copies}")

    def _on_step(self) -> bool:
        return True


def run(algo: str, out: str) -> None:
    folder = os.path.join(out, algo)
    os.makedirs(folder, exist_ok=True)
    if algo == "ppo":
        model = PPO(
            "MlpPolicy",
            "CartPole-v1",
            n_steps=256,
            batch_size=64,
            n_epochs=4,
            seed=0,
            device="cpu",
            verbose=1,
        )
        steps, interval = 2048, 1
    else:
        model = DQN(
            "MlpPolicy",
            "CartPole-v1",
            learning_starts=500,
            train_freq=4,
            seed=0,
            device="cpu",
            verbose=1,
        )
        steps, interval = 3000, 20  # a dump every 20 episodes
    model.set_logger(configure(folder, ["stdout", "csv"]))
    model.learn(total_timesteps=steps, log_interval=interval, callback=KeepCopies(folder))


def main() -> None:
    out = sys.argv[1]
    for algo in ("ppo", "dqn"):
        run(algo, out)


if __name__ == "__main__":
    main()
