"""Adapters that put a bridge behind agent frameworks' own interfaces (each imports only what
its framework needs, and none of them is imported by ``scriptbridge`` itself)."""
