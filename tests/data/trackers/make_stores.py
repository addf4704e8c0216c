"""Write the small tracker stores the tests read, with the trackers' own libraries.

Run from the repository root with tensorboardX, tensorboard, mlflow (or mlflow-skinny with
sqlalchemy and alembic) and wandb installed: `python tests/data/trackers/make_stores.py`.
Everything stays local (W&B offline, MLflow on local paths). Each store holds a run that
trains well (a train loss over steps, a validation accuracy every 5 steps) and one whose loss
becomes NaN at step `NAN_STEP`. `versions.txt` records the library versions that wrote them.
"""

from __future__ import annotations

import math
import os
import shutil
import sys
from importlib.metadata import version

HERE = os.path.dirname(os.path.abspath(__file__))
STEPS = 20
NAN_STEP = 12
WALL0 = 1_700_000_000.0


def loss_at(step: int, nan: bool) -> float:
    """The train loss logged at `step` (NaN from `NAN_STEP` on in the failing run)."""
    return math.nan if nan and step >= NAN_STEP else round(2.0 / (1 + step), 4)


def acc_at(step: int) -> float:
    """The validation accuracy logged at `step`."""
    return round(0.5 + step / 50, 3)


def points(nan: bool) -> list[tuple[int, str, float]]:
    """(step, tag, value) in the order a training logs them."""
    out = []
    for step in range(STEPS):
        out.append((step, "train/loss", loss_at(step, nan)))
        if step % 5 == 4:
            out.append((step, "val/acc", acc_at(step)))
    return out


def tensorboardx_store(root: str) -> None:
    from tensorboardX import SummaryWriter

    for name, nan in (("version_0", False), ("version_1", True)):
        writer = SummaryWriter(os.path.join(root, "lightning_logs", name))
        for step, tag, value in points(nan):
            writer.add_scalar(tag, value, step, walltime=WALL0 + step)
        writer.close()


def tensorboard_summary_store(root: str) -> None:
    from tensorboard.summary import Writer

    for name, nan in (("good", False), ("nan", True)):
        writer = Writer(os.path.join(root, name))
        for step, tag, value in points(nan):
            writer.add_scalar(tag, value, step, wall_time=WALL0 + step)
        writer.close()


def mlflow_store(uri: str) -> None:
    os.environ["MLFLOW_ALLOW_FILE_STORE"] = "true"  # the file store is what older runs hold
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment("demo")
    for name, nan, status in (("good-run", False, "FINISHED"), ("nan-run", True, "FAILED")):
        with mlflow.start_run(run_name=name) as run:
            for step, tag, value in points(nan):
                mlflow.log_metric(tag, value, step=step, timestamp=int((WALL0 + step) * 1000))
        mlflow.tracking.MlflowClient().set_terminated(run.info.run_id, status)


def wandb_store(root: str) -> None:
    import wandb

    os.environ["WANDB_MODE"] = "offline"
    os.environ["WANDB_SILENT"] = "true"
    for name, nan in (("good-run", False), ("nan-run", True)):
        # no machine facts in a committed file: no host, paths, git, hardware or samples
        settings = wandb.Settings(
            x_disable_meta=True,
            x_disable_stats=True,
            x_disable_machine_info=True,
            disable_git=True,
            disable_code=True,
            save_code=False,
            disable_job_creation=True,
            x_save_requirements=False,
            host="host",
            program="make_stores.py",
            program_abspath="make_stores.py",
            program_relpath="make_stores.py",
        )
        # a config record larger than W&B's 32 KiB block: written as FIRST, MIDDLE, LAST chunks
        config = {"notes": "n" * 40_000} if not nan else {}
        run = wandb.init(
            project="demo", name=name, dir=root, mode="offline", settings=settings, config=config
        )
        for step in range(STEPS):
            row = {"train/loss": loss_at(step, nan)}
            if step % 5 == 4:
                row["val/acc"] = acc_at(step)
            print(f"step {step} loss {row['train/loss']}")
            run.log(row, step=step)
        run.finish(exit_code=1 if nan else 0)


def scrub(root: str) -> None:
    """Leave out what names this machine: its paths, its user, wandb's own debug logs."""
    import sqlite3

    for folder, dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(folder, name)
            if name in (
                "debug.log",
                "debug-internal.log",
                "debug-core.log",
                "requirements.txt",
            ) or path.endswith(".wandb.synced"):
                os.remove(path)
            elif name == "meta.yaml" or (os.sep + "tags" + os.sep) in path:
                if os.path.basename(path).startswith(("mlflow.source", "mlflow.user")):
                    os.remove(path)
                    continue
                with open(path) as f:
                    text = f.read().replace(HERE, "<repo>/tests/data/trackers")
                text = text.replace("user_id: " + os.environ.get("USER", "root"), "user_id: user")
                with open(path, "w") as f:
                    f.write(text)
        for name in [d for d in dirs if d in ("logs", "tmp")]:
            shutil.rmtree(os.path.join(folder, name))
            dirs.remove(name)
    latest = os.path.join(root, "wandb", "latest-run")
    if os.path.islink(latest):
        os.remove(latest)
    db = sqlite3.connect(os.path.join(root, "mlflow_sqlite", "mlflow.db"))
    db.execute("DELETE FROM tags WHERE key != 'mlflow.runName'")
    db.execute("UPDATE runs SET artifact_uri = 'artifacts', source_name = '', user_id = 'user'")
    db.execute("UPDATE experiments SET artifact_location = 'artifacts'")
    db.commit()
    db.execute("PRAGMA page_size = 512")  # the same store in fewer bytes (mostly empty tables)
    db.execute("VACUUM")
    db.close()


def main() -> int:
    """Write every store afresh under this directory."""
    stores = {"tensorboardx": tensorboardx_store, "tensorboard_summary": tensorboard_summary_store}
    for name, write in stores.items():
        shutil.rmtree(os.path.join(HERE, name), ignore_errors=True)
        write(os.path.join(HERE, name))
    file_store = os.path.join(HERE, "mlflow_file", "mlruns")
    shutil.rmtree(os.path.dirname(file_store), ignore_errors=True)
    mlflow_store("file:" + file_store)
    db_dir = os.path.join(HERE, "mlflow_sqlite")
    shutil.rmtree(db_dir, ignore_errors=True)
    os.makedirs(db_dir)
    here = os.getcwd()
    os.chdir(db_dir)  # MLflow puts the runs' artifact folders in the working directory
    try:
        mlflow_store("sqlite:///" + os.path.join(db_dir, "mlflow.db"))
    finally:
        os.chdir(here)
    shutil.rmtree(os.path.join(db_dir, "mlruns"), ignore_errors=True)  # artifacts only
    shutil.rmtree(os.path.join(HERE, "wandb"), ignore_errors=True)
    wandb_store(HERE)
    scrub(HERE)
    with open(os.path.join(HERE, "versions.txt"), "w") as out:
        out.write(f"python {sys.version.split()[0]}\n")
        for package in (
            "tensorboardX",
            "tensorboard",
            "protobuf",
            "mlflow-skinny",
            "sqlalchemy",
            "alembic",
            "wandb",
        ):
            try:
                out.write(f"{package} {version(package)}\n")
            except Exception:  # noqa: BLE001 - a package left out is said so
                out.write(f"{package} not installed\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
