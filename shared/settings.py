"""The one settings model of a TideMQ process, read once from `TIDEMQ_*` environment variables.

It extends the store engine's `StoreConfig` (data directory, flush policy, limits) with what the
process itself needs. Every field, its variable and its default are listed in the README.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field

from tidemq_store.config import StoreConfig


class Settings(StoreConfig):
    """Process settings: `TIDEMQ_HOST`, `TIDEMQ_PORT`, plus every `StoreConfig` field."""

    host: str = Field(default="127.0.0.1", description="Address the local gateway listens on.")
    port: int = Field(default=8080, ge=0, le=65535, description="Port the local gateway listens on.")
    gateway_threads: int = Field(default=64, ge=1, description="Handler threads of the local gateway.")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read from the environment on first use."""
    return Settings()
