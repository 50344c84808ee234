"""`orcactl hook AGENT EVENT`: agent lifecycle hooks translated into orcad calls.

This package imports only the standard library on the hook path (a hook runs on every prompt,
so it must start fast); anything heavier is imported where it is rarely needed.
"""
