"""orcad: a per-user local daemon that gives coding agents durable, private memory."""

__version__ = "0.1.0"
