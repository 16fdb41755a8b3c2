"""What every handler shares: the resolver factory, the one error mapping, and observability."""
