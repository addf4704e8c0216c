"""Read the experiment trackers' own stores: TensorBoard event files, MLflow runs, W&B runs."""
