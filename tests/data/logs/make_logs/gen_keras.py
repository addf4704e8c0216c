"""Fit a tiny Keras 3 model (torch backend) with verbose=1 and verbose=2 epoch lines."""

from __future__ import annotations

import os
import sys

os.environ.setdefault("KERAS_BACKEND", "torch")

import keras  # noqa: E402
import numpy as np  # noqa: E402


def main() -> None:
    verbose = int(sys.argv[1])
    rng = np.random.default_rng(0)
    x = rng.normal(size=(512, 8)).astype("float32")
    y = (x[:, 0] > 0).astype("int64")
    model = keras.Sequential(
        [
            keras.Input((8,)),
            keras.layers.Dense(16, activation="relu"),
            keras.layers.Dense(2, activation="softmax"),
        ]
    )
    model.compile(
        optimizer=keras.optimizers.Adam(1e-2),
        loss="sparse_categorical_crossentropy",
        metrics=["accuracy"],
    )
    model.fit(x, y, validation_split=0.25, epochs=3, batch_size=32, verbose=verbose)


if __name__ == "__main__":
    main()
