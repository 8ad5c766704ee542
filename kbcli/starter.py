"""`kb starter`: the site's starter kernel for a problem and a backend, to edit and submit."""

import argparse
import json
import sys
from pathlib import Path

from kbcli import config, exits
from kbcli.client import Client
from kbcli.exits import CommandError

HELP = ("print a problem's starter kernel in a backend (a ModelNew the judge finds correct as "
        "it is), or write it to a file; only for a backend the site's hardware runs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problem", required=True, help="the problem's slug, e.g. level1/19_ReLU")
    parser.add_argument("--backend", required=True,
                        help="the kernel's language, e.g. cuda or triton (`kb hardware` lists "
                        "what the site's hardware runs)")
    parser.add_argument("--hardware",
                        help="a hardware slug: a backend it runs (any of the site's by default)")
    parser.add_argument(
        "-o", "--output",
        help="write it to this file (or into this folder, under the site's file name, "
        "level1_19_ReLU_cuda.py, which `kb submit FOLDER` maps back to its problem)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")


def served_backends(hardware: list[dict], only: str | None = None) -> set[str] | None:
    """The backends the site's hardware runs (of `only`, where named), or None for any: a
    hardware that lists none takes every backend, as the site's submission rule has it."""
    chosen = [h for h in hardware if only is None or h["slug"] == only]
    if only is not None and not chosen:
        raise CommandError(f"this site has no hardware {only!r}", exits.USAGE,
                           code="unknown_hardware", allowed=[h["slug"] for h in hardware])
    if any(not h.get("backends") for h in chosen):
        return None
    return {name for h in chosen for name in h["backends"]}


def cmd_starter(args: argparse.Namespace) -> int:
    saved = config.load()
    client = Client(saved.url, saved.token)
    # The site's answer first: it names an unknown backend, or problem, with the allowed ones.
    starter = client.starter(args.problem, args.backend)
    # It has a starter for every backend, but a kernel of a backend no hardware of the site
    # runs would be refused when submitted: say so now, not after the work on it.
    served = served_backends(client.hardware(), args.hardware)
    if served is not None and args.backend not in served:
        where = f"hardware {args.hardware}" if args.hardware else "this site's hardware"
        raise CommandError(
            f"{where} does not run the {args.backend} backend; it runs "
            f"{', '.join(sorted(served)) or 'none'}", code="unknown_backend",
            allowed=sorted(served))
    if not args.output:
        if args.json:
            print(json.dumps(starter, indent=2))
        else:
            sys.stdout.write(starter["source"])
        return exits.OK
    path = Path(args.output)
    if path.is_dir():
        path = path / starter["filename"]
    # A starter is a first draft; the file there may be the user's edited kernel.
    if path.exists() and not args.force:
        raise CommandError(f"{path} exists; --force overwrites it", exits.USAGE, code="exists")
    try:
        path.write_text(starter["source"], encoding="utf-8")
    except OSError as error:
        raise CommandError(f"cannot write {path}: {error.strerror}", code="unwritable") from None
    print(f"Wrote the {starter['backend']} starter of {starter['problem']} to {path}",
          file=sys.stderr)
    if args.json:
        print(json.dumps({**starter, "path": str(path)}, indent=2))
    return exits.OK
