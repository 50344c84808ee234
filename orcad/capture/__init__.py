"""Automatic-memory capture: turn eligibility, durable extraction jobs, fenced leases, workers,
and the per-project ledger they publish into."""
