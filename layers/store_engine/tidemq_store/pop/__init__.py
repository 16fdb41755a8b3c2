"""Pop consumption's ledger: see api.py."""
