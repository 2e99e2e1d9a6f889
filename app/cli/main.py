"""`adaptserve plan | profile`: one module per command in app/cli/."""

from __future__ import annotations

import argparse
import logging
import sys

from app.cli import plan, profile


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="adaptserve")
    sub = parser.add_subparsers(dest="command", required=True)
    for command in (plan, profile):
        command.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    args = build_parser().parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
