"""orcactl: inspect and drive the orcad daemon."""
