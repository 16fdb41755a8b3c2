"""Stateless Lambda handlers (produce, consume, admin) and the local gateway that serves them."""
