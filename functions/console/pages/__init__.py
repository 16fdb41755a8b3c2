"""The console's pages, one module per subject; each adds its routes to `functions.console.visit.ROUTES`."""

from . import dead_letters, groups, messages, overview, system, topics, trace, users  # noqa: F401
