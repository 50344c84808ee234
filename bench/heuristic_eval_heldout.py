"""Held-out messages for `bench/heuristic_eval.py --set heldout`, written after heuristic-v6's
rules, with the same labels as bench/heuristic_eval_data.py. They changed one rule: "run the
tests with pytest -x" was kept as an instruction, so "run the tests with" and command-line flags
no longer make one (recall 0.750, precision 0.938 before; 0.750 and 1.000 after)."""

from __future__ import annotations

FACTS: list[str] = [
    "Our Postgres runs on RDS.",
    "the monorepo uses turborepo",
    "The web app is deployed on Netlify.",
    "Python version is 3.12 everywhere.",
    "We ship Docker images to Docker Hub.",
    "The default branch is main and it is protected.",
    "Unit tests live under tests/unit.",
    "Use ruff instead of flake8.",
    "Staging DB is db-stg-1.",
    "please fix the typo, also fyi our package manager is bun",
    "Background jobs run on Celery with Redis as the broker.",
    "The mobile API is versioned with a header, not the URL.",
    "We format Go code with gofumpt.",
    "Never use print for logging.",
    "The search service is Elasticsearch 8.",
    "Every commit must be signed.",
    "Our frontend is written in TypeScript.",
    "I prefer pytest fixtures over setUp methods.",
    "Prod is on Kubernetes in us-east-1.",
    "Dependencies are managed with Poetry.",
]

NOTHING: list[str] = [
    "The staging DB is out of disk.",
    "Can you make the CI faster?",
    "The frontend is blank on Firefox.",
    "Use the second query instead of the first.",
    "Run the tests with pytest -x.",
    "CI runs on Buildkite but the lint job times out.",
    "The API is returning 401s.",
    "We're on the review step.",
    "the database is empty after the reset",
    "Postgres is using 100% CPU.",
    "Please rewrite the docs section on auth.",
    "Our tests take 12 minutes.",
    "Why does the backend use so much memory?",
    "The deploy to prod went fine.",
    "The main branch is ahead of my fork.",
    "Prod is down again.",
    "Migrations failed on staging.",
    "Switch the cache to Redis.",
    "The config is in a weird state.",
    "I'm running Node 22 locally.",
]
