"""Record filters and the per-split scan the jobs run on executors."""
