"""The web console: server-rendered pages (Jinja2 templates, htmx, Pico CSS, uPlot) under `/console`, one more
Lambda-style function whose pages call the same logic functions as the HTTP API (docs/console.md)."""
