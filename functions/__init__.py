"""Stateless Lambda handlers (produce, consume, admin, push) and the local gateway that serves them."""
