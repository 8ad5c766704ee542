"""`kb starter`: the site's starter kernel for a problem and a backend, to edit and submit."""

import argparse
import json
import sys
from pathlib import Path

from evaluator.backends import NAMES
from kbcli import config
from kbcli.client import Client

HELP = ("print a problem's starter kernel in a backend (a ModelNew the judge finds correct as "
        "it is), or write it to a file")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problem", required=True, help="the problem's slug, e.g. level1/19_ReLU")
    parser.add_argument("--backend", required=True, help=f"one of {', '.join(NAMES)}")
    parser.add_argument(
        "-o", "--output",
        help="write it to this file (or into this folder, under the site's file name, "
        "level1_19_ReLU_cuda.py, which `kb submit FOLDER` maps back to its problem)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def cmd_starter(args: argparse.Namespace) -> int:
    saved = config.load()
    starter = Client(saved.url, saved.token).starter(args.problem, args.backend)
    if not args.output:
        if args.json:
            print(json.dumps(starter, indent=2))
        else:
            sys.stdout.write(starter["source"])
        return 0
    path = Path(args.output)
    if path.is_dir():
        path = path / starter["filename"]
    # A starter is a first draft; the file there may be the user's edited kernel.
    if path.exists() and not args.force:
        print(f"kb: {path} exists; --force overwrites it", file=sys.stderr)
        return 2
    try:
        path.write_text(starter["source"], encoding="utf-8")
    except OSError as error:
        print(f"kb: cannot write {path}: {error.strerror}", file=sys.stderr)
        return 1
    print(f"Wrote the {starter['backend']} starter of {starter['problem']} to {path}",
          file=sys.stderr)
    return 0
