"""One module per group of orcactl commands; each exposes `register(subparsers)`."""
