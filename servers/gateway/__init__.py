"""The local gateway (`python -m servers.gateway`): `app.py`."""
