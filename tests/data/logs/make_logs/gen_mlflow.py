"""Write a small MLflow file store with the real library: the `mlflow` test logs.

Run with mlflow (or mlflow-skinny) installed: `python tests/data/logs/make_logs/gen_mlflow.py`.
It writes `tests/data/logs/mlflow/mlruns/` afresh: one experiment, one run whose metrics
have plain, nested (`train/loss`) and odd names, steps that go back when the run is resumed
into the same run id, and a NaN value. The tests read the written files; they never need
mlflow itself.
"""

from __future__ import annotations

import math
import os
import shutil

import mlflow

HERE = os.path.dirname(os.path.abspath(__file__))
STORE = os.path.join(HERE, os.pardir, "mlflow", "mlruns")


def main() -> None:
    """Write the store: a first stretch of a run, then the same run resumed from step 2."""
    shutil.rmtree(STORE, ignore_errors=True)
    # MLflow 3 keeps the file store in maintenance mode and asks for this to write one
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"
    mlflow.set_tracking_uri("file:" + os.path.abspath(STORE))
    mlflow.set_experiment("segmentation")
    with mlflow.start_run(run_name="resumed") as run:
        for step in range(4):
            mlflow.log_metric("train/loss", 2.0 / (step + 1), step=step)
            mlflow.log_metric("lr", 0.1 * 0.5**step, step=step)
        mlflow.log_metric("val_acc", 0.5, step=3)
        mlflow.log_metric("eval/per class/iou: bg", 0.75, step=3)
        mlflow.log_metric("eval/dice.tumor-core", math.nan, step=3)
        run_id = run.info.run_id
    # the job died after step 3 and resumed from its step-2 checkpoint into the same run id
    with mlflow.start_run(run_id=run_id):
        for step in range(2, 5):
            mlflow.log_metric("train/loss", 1.5 / (step + 1), step=step)
    _forget_this_machine(os.path.abspath(STORE))


def _forget_this_machine(store: str) -> None:
    """Drop the tags naming the writer's user, checkout and script; write the store as `<repo>`."""
    for root, _dirs, files in os.walk(store):
        for name in files:
            path = os.path.join(root, name)
            if os.path.basename(root) == "tags" and name.startswith(
                ("mlflow.source.", "mlflow.user")
            ):
                os.remove(path)
            elif name == "meta.yaml":
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                with open(path, "w", encoding="utf-8") as handle:
                    handle.write(text.replace(store, "<repo>/tests/data/logs/mlflow/mlruns"))


if __name__ == "__main__":
    main()
