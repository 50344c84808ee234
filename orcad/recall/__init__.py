"""Recall: the per-turn memory an agent injects (barrier, selection, caps, snapshot, context)."""
