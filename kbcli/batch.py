"""`kb submit FOLDER`: every kernel file in a folder, in one request to the batch API, each
file's problem told by its name (or one problem for all with --problem)."""

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kbcli import exits
from kbcli.client import ApiError, Client, succeeded
from kbcli.exits import CommandError
from kbcli.files import read_kernel

BATCH_MAX = 100  # the batch API's limit (submissions.services.BATCH_MAX); more go in several

NAMING = (
    "A FOLDER submits every .py file in it and its subfolders, in one request. Each file's "
    "problem is told by its name: KernelBench's generations, level_1_problem_19_sample_0_kernel"
    ".py; the slug as a path, level1/19_ReLU.py; or the slug with '_' for '/', "
    "level1_19_ReLU.py, as `kb starter -o FOLDER` names its file (anything after the number "
    "may follow, and is not checked). --problem (or --level and --number) names one problem "
    "for every file instead. A file that cannot be mapped, or that the site refuses, is named "
    "with the reason; the others are submitted all the same."
)

# KernelBench's generation files, as submissions/runs/importing.py imports them.
GENERATION = re.compile(r"level_(\d+)_problem_(\d+)_sample_\d+_kernel\.py")
# The slug (level1/19_ReLU) as a path or with "_" for "/"; the name after the number is free
# because the starter's file name adds the backend (level1_19_ReLU_cuda.py).
SLUG = re.compile(r"level(\d+)[/_](\d+)(?:_[^/]*)?\.py")


@dataclass
class Item:
    name: str  # the file's path inside the folder, also sent as its filename
    fields: dict  # the batch API's item


def problem_for(path: Path) -> dict | None:
    """The problem a kernel file's name tells, as the API takes it ({"level", "number"}), or
    None. The file's name is read alone and with its folder's (level1/19_ReLU.py)."""
    for text in (path.name, f"{path.parent.name}/{path.name}"):
        match = GENERATION.fullmatch(text) or SLUG.fullmatch(text)
        if match:
            return {"level": int(match[1]), "number": int(match[2])}
    return None


def kernel_files(folder: Path) -> list[Path]:
    """The folder's .py files, its subfolders' included, in name order; hidden and dunder
    paths (.git, __pycache__, __init__.py) are not kernels."""
    return sorted(
        path for path in folder.rglob("*.py")
        if path.is_file()
        and not any(part.startswith((".", "__")) for part in path.relative_to(folder).parts)
    )


Refused = list[tuple[str, str]]  # (the file's path in the folder, why it was not submitted)


def plan(folder: Path, problem: dict | None, common: dict) -> tuple[list[Item], Refused]:
    """The batch items for the folder's kernel files, and (file, reason) for each file that
    cannot be sent: its problem not told by its name (and no `problem` for all), or unreadable."""
    items, refused = [], []
    for path in kernel_files(folder):
        name = path.relative_to(folder).as_posix()
        named = problem or problem_for(path)
        if named is None:
            refused.append((name, "cannot tell its problem from its name (level_1_problem_19_"
                                  "sample_0_kernel.py, level1/19_ReLU.py or level1_19_ReLU.py; "
                                  "or give --problem)"))
            continue
        try:
            source = read_kernel(path)
        except ValueError as error:
            refused.append((name, str(error)))
            continue
        items.append(Item(name, {**named, **common, "source": source, "filename": name[-255:]}))
    return items, refused


def too_large(items: list[Item], limit: int | None) -> tuple[list[Item], Refused]:
    """The items that fit the site's size limit, and (file, reason) for those that do not, in
    the site's own words and figure (None: the site does not say; it answers each itself)."""
    if limit is None:
        return items, []
    fits, refused = [], []
    for item in items:
        size = len(item.fields["source"].encode("utf-8"))
        if size > limit:
            refused.append((item.name, f"The source is {size} bytes; the limit is {limit}."))
        else:
            fits.append(item)
    return fits, refused


def item_errors(error: ApiError) -> dict[int, str]:
    """The batch API's refusal of single items: {index: why}; empty when the whole batch was
    refused (a login, a quota, a malformed request)."""
    if error.code != "invalid_batch" or not isinstance(error.errors, list):
        return {}
    reasons = {}
    for item in error.errors:
        text = str(item.get("detail"))  # a syntax error's detail names its line already
        if item.get("allowed"):
            text += " Allowed: " + ", ".join(str(value) for value in item["allowed"])
        reasons[int(item["index"])] = text
    return reasons


def submit_all(client: Client, items: list[Item]) -> tuple[list[tuple[Item, dict]], Refused]:
    """Submit the items, BATCH_MAX a request. The API stores a batch all or none, so the items
    it refuses are set aside with its reason and the rest sent again: one bad file loses no
    other. Returns (item, accepted record) pairs and (file, reason) for the refused."""
    accepted, refused = [], []
    for start in range(0, len(items), BATCH_MAX):
        chunk = items[start:start + BATCH_MAX]
        while chunk:  # each round sets aside at least one item, or ends
            try:
                records = client.submit_batch([item.fields for item in chunk])
            except ApiError as error:
                reasons = item_errors(error)
                if not reasons:
                    refused += [(item.name, error.describe()) for item in chunk]
                    break
                refused += [(chunk[i].name, why) for i, why in sorted(reasons.items())]
                chunk = [item for i, item in enumerate(chunk) if i not in reasons]
                continue
            accepted += list(zip(chunk, records, strict=True))
            break
    return accepted, refused


def common_fields(args: argparse.Namespace) -> dict:
    fields = {"backend": args.backend}
    if args.hardware:  # without it the site takes its only hardware, or says which there are
        fields["hardware"] = args.hardware
    if args.precision:
        fields["precision"] = args.precision
    return fields


def problem_for_all(args: argparse.Namespace) -> dict | None:
    if args.problem:
        return {"problem": args.problem}
    if args.level is not None and args.number is not None:
        return {"level": args.level, "number": args.number}
    return None


def cmd_submit_folder(
    args: argparse.Namespace,
    client: Client,
    progress: Callable[[], Any],
    outcome: Callable[[dict], str],
) -> int:
    """Submit the folder's kernel files; with --wait follow each until it is settled.
    `progress` makes kb's live status line (called with each event, then closed), `outcome`
    describes a settled submission (both from kbcli.main, which imports this module)."""
    folder = Path(args.file)
    if (args.level is None) != (args.number is None):
        raise CommandError("--level and --number go together", exits.USAGE, code="usage")
    items, refused = plan(folder, problem_for_all(args), common_fields(args))
    if not items and not refused:
        raise CommandError(f"{folder} holds no .py kernel files", exits.USAGE, code="usage")
    items, oversized = too_large(items, client.max_source_bytes() if items else None)
    refused += oversized
    accepted, server_refused = submit_all(client, items) if items else ([], [])
    refused += server_refused
    for name, why in refused:
        print(f"kb: {name}: {why}", file=sys.stderr)
    if not args.json:
        for item, record in accepted:
            print(f"Submitted {item.name} as submission {record['id']}: {record['page_url']}")
    total = len(accepted) + len(refused)
    print(f"kb: submitted {len(accepted)} of {total} kernel files", file=sys.stderr)
    batches = sorted({record["batch"] for _, record in accepted if record.get("batch")})
    if batches:
        ids = " ".join(str(batch) for batch in batches)
        print(f"kb: batch {ids} (`kb cancel --batch ID` cancels what of it still waits or "
              "runs)", file=sys.stderr)
    finals = {}
    if args.wait:
        deadline = time.monotonic() + args.timeout
        for item, record in accepted:
            show = progress()
            try:
                finals[item.name] = client.follow(
                    record, timeout=max(deadline - time.monotonic(), 1), on_event=show)
            except TimeoutError as error:
                print(f"kb: {item.name}: {error}", file=sys.stderr)
            finally:
                show.close()
        if not args.json:
            for item, _ in accepted:
                final = finals.get(item.name)
                print(f"{item.name}: {outcome(final) if final else 'not settled in time'}")
    if args.json:
        print(json.dumps({
            "submitted": [{"file": item.name, **finals.get(item.name, record)}
                          for item, record in accepted],
            "refused": [{"file": name, "error": why} for name, why in refused],
        }, indent=2))
    # As for one file (kbcli.main.EXIT_HELP): 0 when every file was taken and, with --wait, each
    # settled correct and ranked (or a correct test run); 1 when one was not; 3 when all that
    # settled did, but some were not settled in time.
    if refused or any(not succeeded(final) for final in finals.values()):
        return exits.FAILED
    if args.wait and len(finals) < len(accepted):
        return exits.PENDING
    return exits.OK
