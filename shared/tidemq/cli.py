"""The `tidemq` command line."""


def main() -> None:
    raise SystemExit("tidemq: the CLI is being built")
