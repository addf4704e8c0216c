"""The dashboard's commands (`monitor`, `replay`, `demo`, `record --tui`) and the app's run."""
