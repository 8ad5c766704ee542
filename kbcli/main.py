"""The `kb` command: log in, list problems, submit a kernel and follow it, read results.

Every command takes --json (one JSON document on stdout, an error as {"error": ...}); `kb guide`
prints what an agent needs to use the site. Exit statuses: kbcli/exits.py.
"""

import argparse
import getpass
import json
import platform
import sys
import time
from pathlib import Path

import requests

from kbcli import batch, config, exits, guide, starter
from kbcli.client import ApiError, Client, settled, succeeded
from kbcli.diagnosis import diagnosis_lines
from kbcli.exits import CommandError
from kbcli.files import read_kernel

# No list of backends here: the client knows no evaluator (kbcli/pyproject.toml), and the site
# says which it runs, and refuses another with the allowed ones.
BACKEND_HELP = "the kernel's language, e.g. cuda, triton or torch (`kb hardware` lists the site's)"

# What a command exits with (kbcli/exits.py): with --wait, once the submission is settled or
# the wait gives up, so a script can tell a result from a wait that ran out.
EXIT_OK = exits.OK  # settled: correct and ranked, or a correct test run (client.succeeded)
EXIT_FAILED = exits.FAILED  # an error; or settled otherwise: not correct, flagged, held, ...
EXIT_USAGE = exits.USAGE
EXIT_PENDING = exits.PENDING  # --timeout ran out before it was settled: it goes on
EXIT_HELP = exits.help_text()


class Progress:
    """One status line, rewritten in place on a terminal and one line per change otherwise."""

    def __init__(self, stream=None) -> None:
        self.stream = stream or sys.stderr  # the one of the moment (a test may capture it)
        self.live = self.stream.isatty()
        self.last = ""

    def __call__(self, event: dict) -> None:
        line = describe(event)
        if not line or line == self.last:
            return
        self.last = line
        if self.live:
            self.stream.write("\r\033[K" + line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.live and self.last:
            self.stream.write("\n")
            self.stream.flush()


def describe(event: dict) -> str:
    status = event.get("status", "")
    submission = event.get("submission") or event.get("id")
    prefix = f"submission {submission}: " if submission else ""
    if status == "queued":
        position = event.get("queue_position")
        return prefix + (f"queued, position {position}" if position else "queued")
    if status == "running":
        progress = event.get("progress") or {}
        if progress.get("type") == "trial":
            return prefix + f"running: checking trial {progress.get('k')} of {progress.get('n')}"
        if progress.get("phase"):
            return prefix + f"running: {progress['phase']}"
        return prefix + "running"
    if status == "cancelled":
        return prefix + "cancelled"
    if status == "finished":
        line = prefix + f"finished: {event.get('verdict')}"
        ranking = event.get("ranking")
        if ranking and ranking.get("state") == "pending":
            line += "; ranking pending: re-verification with fresh seeds"
        elif ranking and settled(event):
            line += f"; {describe_ranking({**ranking, 'reason': None})}"
        return line
    return ""


def fmt_ms(value) -> str:
    return "-" if value is None else f"{value:.4g} ms"


def fmt_x(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fmt_rank(value) -> str:
    """A rank, or "-" for one listed without a rank (the API's null: no point yet)."""
    return "-" if value is None else str(value)


# The API's ranking: state (ranked | pending | held | off_board) and detail (why, as a code).
RANKING_STATES = {
    "ranked": "ranked",
    "pending": "pending",
    "held": "held",
    "off_board": "off board",
}
RANKING_LABELS = {  # details; also the states of servers from before `detail`
    "pending_reverification": "pending re-verification",
    "timing_not_reproduced": "timing not reproduced",
    "timing_unconfirmed": "timing not confirmed",
    "failed_reverification": "failed re-verification",
    "flagged": "flagged",
    "not_correct": "not correct",
    "not_timed": "not timed",
    "not_evaluated": "not evaluated yet",
    "test_run": "a test run",
    "cancelled": "cancelled",
}


def describe_ranking(ranking: dict | None) -> str:
    """The API's ranking as one line: "ranked, #2: Rank 2 on ...", "held, timing not
    reproduced: ...", "off board, flagged: ...", or why it does not rank."""
    if not ranking:
        return "-"
    state, detail = ranking.get("state"), ranking.get("detail")
    if state in RANKING_STATES:
        label = RANKING_STATES[state]
        if detail and detail != state:
            label += f", {RANKING_LABELS.get(detail, str(detail))}"
    else:
        label = RANKING_LABELS.get(state, str(state))
    if ranking.get("rank"):
        label += f", #{ranking['rank']}"
    reason = ranking.get("reason")
    if reason and detail == "test_run":
        # The site's reason repeats the label ("A test run: ...") and names the submit page's
        # checkbox: kb says what ranks instead.
        reason = "never ranked; `kb submit` the same file to rank it"
    return f"{label}: {reason}" if reason else label


def summary(data: dict) -> str:
    problem = data.get("problem") or {}
    rows = [
        ("problem", f"{problem.get('slug')}  ({data.get('backend')} on {data.get('hardware')}, "
                    f"{data.get('precision')})"),
        ("status", data.get("status")),
        ("verdict", data.get("verdict") or "-"),
        ("correct", {True: "yes", False: "no"}.get(data.get("correct"), "-")),
        ("candidate", fmt_ms(data.get("candidate_ms"))),
        ("reference", fmt_ms(data.get("reference_ms"))),
        ("speedup", fmt_x(data.get("speedup"))),
    ]
    if data.get("queue_position"):
        estimate = data.get("queue_estimate_s")
        rows.append(("queue", f"position {data['queue_position']}"
                     + (f", result in about {max(estimate, 1)} s" if estimate is not None else "")))
    if "ranking" in data:
        rows.append(("ranking", describe_ranking(data["ranking"])))
        if data.get("status") == "finished" and not settled(data):
            rows.append(("", "(not settled yet: `kb status ID --wait` follows it to the end)"))
    if data.get("flags"):
        rows.append(("exploits", ", ".join(str(flag) for flag in data["flags"])))
    for note in data.get("notes") or []:
        rows.append(("note", note.get("text") or note.get("name") if isinstance(note, dict)
                     else str(note)))
    if data.get("error"):
        rows.append(("error", data["error"]))
    # The failed trial's diagnosis, as `kb check` shows it: the error's shape, the hint, the
    # worst positions (the API gives it to whoever may see the source).
    diagnosis = (data.get("evaluation") or {}).get("diagnosis")
    if isinstance(diagnosis, dict):
        rows += [("diagnosis" if i == 0 else "", line)
                 for i, line in enumerate(diagnosis_lines(diagnosis))]
    rows.append(("page", (data.get("urls") or {}).get("page_url", "")))
    kind = "Test run" if data.get("test_run") else "Submission"
    head = f"{kind} {data.get('id')}: {data.get('verdict') or data.get('status')}"
    text = head + "\n" + "\n".join(f"  {name:<10} {value}" for name, value in rows)
    profile = (data.get("evaluation") or {}).get("profile")
    return text + ("\n\n" + profile_text(profile) if profile else "")


def profile_text(profile: dict) -> str:
    """Where the device time went, per kernel, each side ("*" marks the kernel's own)."""
    parts = []
    for side in profile.get("sides") or []:
        rows = [[("* " if k.get("own") else "  ") + str(k.get("name"))[:70], k.get("calls"),
                 f"{k.get('device_us', 0):,.1f} us",
                 "" if k.get("share") is None else f"{k['share']:.1%}"]
                for k in side.get("kernels") or []]
        rates = " · ".join(t for t in (side.get("bandwidth_text"), side.get("compute_text")) if t)
        parts.append(f"{side.get('label')}: {side.get('total_text')}"
                     + (f" ({rates})" if rates else "") + "\n"
                     + (f"{side['scaled']}\n" if side.get("scaled") else "")
                     + table(rows, ["kernel", "calls", "device time", "share"]))
    return "\n\n".join(parts)


def ncu_text(report: dict) -> str:
    head = f"Nsight Compute report {report.get('id')}: {report.get('status')}"
    if report.get("seconds"):
        head += f" (ncu took {report['seconds']:.1f} s)"
    lines = [head]
    if report.get("message"):
        lines.append(f"  {report['message']}")
    rows = [[str(k.get("name"))[:60], f"{k.get('duration_ns') or 0:,.0f} ns",
             *[f"{k[key]:.1f}%" if k.get(key) is not None else "-"
               for key in ("compute_pct", "memory_pct", "occupancy_pct")],
             ", ".join(f"{reason} {value}" for reason, value in k.get("stalls") or [])]
            for k in report.get("kernels") or []]
    if rows:
        lines.append(table(rows, ["kernel", "duration", "compute", "memory", "occupancy",
                                  "top warp stalls"]))
    if report.get("report_url"):
        lines.append(f"report file: {report['report_url']}")
    return "\n".join(lines)


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
             for row in [header, *rows]]
    return "\n".join(lines)


def client_from_config() -> Client:
    saved = config.load()
    return Client(saved.url, saved.token)


def emit(args, data, text: str) -> None:
    print(json.dumps(data, indent=2) if args.json else text)


def fail(args, message: str, exit_status: int = EXIT_FAILED, **error) -> int:
    """Say why the command stops (stderr) and, with --json, the same as {"error": {...}} on
    stdout, so that stdout holds one JSON document whatever the outcome; return the status."""
    print(f"kb: {message}", file=sys.stderr)
    if getattr(args, "json", False):
        body = {"detail": message, **{k: v for k, v in error.items() if v not in (None, "", [])}}
        print(json.dumps({"error": body}, indent=2))
    return exit_status


# ---- commands -----------------------------------------------------------------------------------


def read_secret(prompt: str) -> str:
    return getpass.getpass(prompt) if sys.stdin.isatty() else sys.stdin.readline().strip()


def cmd_login(args) -> int:
    if args.username:
        password = read_secret(f"Password for {args.username}: ")
        if not password:
            raise CommandError("no password given", EXIT_USAGE, code="usage")
        # A new token, named after this machine; the password itself is never saved.
        client = Client.with_password(
            args.url, args.username, password, name=f"kb on {platform.node()}"[:100]
        )
    else:
        token = args.token or read_secret("API token (from your profile page): ")
        if not token:
            raise CommandError("no token given", EXIT_USAGE, code="usage")
        client = Client(args.url, token)
    client.get("/api/v1/hardware/")  # a bad or revoked token answers 401 here
    path = config.save(config.Config(url=client.url, token=client.token))
    # Never the token itself: it is in the file, readable by its owner only.
    emit(args, {"url": client.url, "config": str(path)},
         f"Logged in to {client.url}; saved to {path}")
    return EXIT_OK


def cmd_problems(args) -> int:
    problems = client_from_config().problems(level=args.level, status=args.status, q=args.search)
    rows = [[p["level"], p["number"], p["slug"], p["status"], p["precision"]] for p in problems]
    emit(args, problems, table(rows, ["level", "number", "slug", "status", "precision"]))
    return EXIT_OK


def cmd_problem(args) -> int:
    client = client_from_config()
    if args.number is None:
        if "/" not in args.problem:
            raise CommandError("name the problem by its slug (level1/19_ReLU) or its level and "
                               "number", EXIT_USAGE, code="usage")
        problem = client.problem_by_slug(args.problem)
        problem = client.problem(problem["level"], problem["number"])
    elif args.problem.isdigit():
        problem = client.problem(int(args.problem), args.number)
    else:
        raise CommandError("give a slug (level1/19_ReLU), or a level and a number", EXIT_USAGE,
                           code="usage")
    emit(args, problem, f"# {problem['slug']} ({problem['status']}, {problem['precision']})\n"
                        + problem["source"])
    return EXIT_OK


def cmd_hardware(args) -> int:
    hardware = client_from_config().hardware()
    rows = [[h["slug"], h["name"], ",".join(h["backends"]), h["queue_length"], h["running"],
             h["online_runners"]] for h in hardware]
    emit(args, hardware,
         table(rows, ["slug", "name", "backends", "queued", "running", "runners online"]))
    return EXIT_OK


def _finish(args, client: Client, submission: dict) -> int:
    """Follow the submission until it is settled (finished, its ranking no longer pending a
    re-verification), show it, and exit as EXIT_HELP says."""
    progress = Progress()
    try:
        final = client.follow(submission, timeout=args.timeout, on_event=progress)
    except TimeoutError as error:
        progress.close()
        print(f"kb: {error}", file=sys.stderr)
        if args.json:  # the submission as it is now: its `settled` is false
            print(json.dumps(client.submission(submission["id"]), indent=2))
        return EXIT_PENDING
    progress.close()
    emit(args, final, summary(final))
    return EXIT_OK if succeeded(final) else EXIT_FAILED


def _read_source(client: Client, path: Path) -> str:
    """The kernel file's text, once it is known to fit the site's size limit."""
    try:
        source = read_kernel(path)
    except ValueError as error:
        raise CommandError(f"{path}: {error}", EXIT_USAGE, code="unreadable") from None
    check_size(client, {path.name: source})
    return source


def check_size(client: Client, sources: dict[str, str]) -> None:
    """Refuse a source over the site's limit before it is sent, naming the site's own figure:
    sent, the site would answer with its limit on a whole request body, a larger number."""
    limit = client.max_source_bytes()
    if limit is None:  # a site from before the API said it: its answer decides
        return
    for name, source in sources.items():
        size = len(source.encode("utf-8"))
        if size > limit:
            raise CommandError(f"{name}: the source is {size} bytes; the limit is {limit}.",
                               code="too_large")


def problem_fields(args) -> dict:
    """The problem as the API takes it: {"problem": slug} or {"level", "number"}."""
    if args.problem:
        return {"problem": args.problem}
    if args.level is not None and args.number is not None:
        return {"level": args.level, "number": args.number}
    raise CommandError("name the problem: --problem level1/19_ReLU (or --level and --number)",
                       EXIT_USAGE, code="usage")


def problem_numbers(client: Client, args) -> tuple[int, int]:
    """(level, number) of the problem named by --problem or --level/--number."""
    fields = problem_fields(args)
    if "problem" in fields:
        problem = client.problem_by_slug(fields["problem"])
        return problem["level"], problem["number"]
    return fields["level"], fields["number"]


def default_hardware(client: Client, given: str | None) -> str:
    """The hardware named, else the only one the site has."""
    if given:
        return given
    slugs = [h["slug"] for h in client.hardware()]
    if len(slugs) == 1:
        return slugs[0]
    raise CommandError("name the hardware with --hardware; this site has "
                       + (", ".join(slugs) if slugs else "none"), EXIT_USAGE,
                       code="hardware_required", allowed=slugs)


def cmd_submit(args) -> int:
    path = Path(args.file)
    if path.is_dir():  # every kernel file in it, in one batch request (kbcli/batch.py)
        return batch.cmd_submit_folder(args, client_from_config(), Progress, describe)
    return _submit_file(args, path, wait=args.wait)


TEST_HELP = ("a test run of a kernel file: checked for correctness on the site's hardware "
             "(timed too with --timing), never ranked, followed to its verdict; exit 0 when "
             "correct")


def cmd_test(args) -> int:
    return _submit_file(args, Path(args.file), wait=not args.no_wait,
                        extra={"test_run": True, "timing": args.timing})


def _submit_file(args, path: Path, *, wait: bool, extra: dict | None = None) -> int:
    problem = problem_fields(args)
    client = client_from_config()
    source = _read_source(client, path)
    # Without --hardware the server takes its only hardware, or says which there are.
    fields = {**problem, "backend": args.backend, "source": source, "filename": path.name}
    if args.hardware:
        fields["hardware"] = args.hardware
    if args.precision:
        fields["precision"] = args.precision
    accepted = client.submit(**fields, **(extra or {}))
    kind = "a test run" if (extra or {}).get("test_run") else "submission"
    print(f"Submitted {path.name} as {kind} {accepted['id']}: {accepted['page_url']}",
          file=sys.stderr)
    if not wait:
        emit(args, accepted, str(accepted["id"]))
        return EXIT_OK
    return _finish(args, client, accepted)


def cmd_status(args) -> int:
    client = client_from_config()
    data = client.submission(args.id)
    if args.wait and not settled(data):
        return _finish(args, client, data)
    emit(args, data, summary(data))
    if args.wait:  # settled already: its outcome, as when it was followed to the end
        return EXIT_OK if succeeded(data) else EXIT_FAILED
    return EXIT_OK  # a look at it, whatever it is


def cmd_list(args) -> int:
    """Your submissions, newest first."""
    filters = {"status": args.status, "verdict": args.verdict, "hardware": args.hardware,
               "problem": args.problem, "limit": args.limit}
    submissions = client_from_config().submissions(**filters)
    rows = [[f"{s['id']}{' (test)' if s.get('test_run') else ''}", s["problem"]["slug"],
             s["backend"], s["hardware"], s["status"],
             s.get("verdict") or "-", s.get("reverification") or "-",
             str(s["created_at"])[:16].replace("T", " ")] for s in submissions]
    emit(args, submissions, table(rows, ["id", "problem", "backend", "hardware", "status",
                                         "verdict", "re-verification", "submitted"])
         if rows else "No submissions.")
    return EXIT_OK


def cmd_reverify(args) -> int:
    """Ask for another re-verification of a held result (the owner's, within the quota)."""
    client = client_from_config()
    reverification = client.reverify(args.id)
    print(f"Re-verification {reverification['id']} of submission {args.id} queued",
          file=sys.stderr)
    if not args.wait:
        emit(args, reverification, str(reverification["id"]))
        return EXIT_OK
    return _finish(args, client, client.submission(args.id))


def cmd_cancel(args) -> int:
    """Cancel a queued or running submission of yours, or (--batch) every one of a batch."""
    client = client_from_config()
    if args.batch:
        batch = client.cancel_batch(args.id)
        counts = batch.get("counts") or {}
        emit(args, batch, f"Batch {batch['id']}: {batch['status']} ("
             + ", ".join(f"{counts.get(name, 0)} {name}"
                         for name in ("cancelled", "finished", "running", "queued")) + ")")
        return EXIT_OK
    data = client.cancel(args.id)
    kind = "Test run" if data.get("test_run") else "Submission"
    emit(args, data, f"{kind} {data['id']}: {data['status']}")
    return EXIT_OK


def cmd_leaderboard(args) -> int:
    client = client_from_config()
    numbers = problem_numbers(client, args)
    hardware = default_hardware(client, args.hardware)
    board = client.board(*numbers, hardware, precision=args.precision)
    rows = [[fmt_rank(r["rank"]), r["participant"], fmt_ms(r["candidate_ms"]), fmt_x(r["speedup"]),
             fmt_x(r["speedup_eager"]), fmt_x(r["speedup_compile"]), r["backend"],
             r["precision"], str(r["date"])[:10]] for r in board["rows"]]
    # A board is one problem, hardware and precision: which one this is, and the others.
    title = f"{board['problem']['slug']} on {board['hardware']}, {board['board']}"
    others = [f"{b['board']} ({b['ranked']} ranked)" for b in board.get("boards", [])
              if b["precision"] != board["precision"]]
    if others:
        title += "; also " + ", ".join(others) + " (--precision)"
    text = title + "\n" + (
        table(rows, ["rank", "participant", "median", "speedup", "vs eager", "vs compile",
                     "backend", "precision", "date"]) if rows else "No correct kernels yet."
    )
    emit(args, board, text)
    return EXIT_OK


def cmd_competitions(args) -> int:
    competitions = client_from_config().competitions()
    rows = [[c["slug"], c["title"], c["hardware"], c["phase"] + (", final" if c["frozen"] else ""),
             c["starts_at"][:16], c["ends_at"][:16]] for c in competitions]
    emit(args, competitions, table(rows, ["slug", "title", "hardware", "phase", "starts", "ends"])
         if rows else "No competitions.")
    return EXIT_OK


def cmd_standings(args) -> int:
    competition = client_from_config().competition(args.slug)
    rows = [[fmt_rank(r["rank"]), r["user"], r["points"], r["solved"]]
            for r in competition["standings"]]
    title = (f"{competition['title']} on {competition['hardware']} ({competition['phase']}"
             f"{', final' if competition['frozen'] else ''}): "
             f"{', '.join(competition['problems'])}")
    emit(args, competition, title + "\n" + (
        table(rows, ["rank", "person", "points", "solved"]) if rows else "No entries yet."
    ))
    return EXIT_OK


def cmd_enter(args) -> int:
    client = client_from_config()
    source = _read_source(client, Path(args.file))
    fields = {"problem": args.problem, "backend": args.backend, "source": source,
              "filename": Path(args.file).name}
    if args.precision:
        fields["precision"] = args.precision
    entry = client.enter(args.slug, **fields)
    late = " (after the deadline: evaluated, not ranked)" if entry["after_deadline"] else ""
    print(f"Entered {Path(args.file).name} as submission {entry['submission_id']}{late}",
          file=sys.stderr)
    if not args.wait:
        emit(args, entry, str(entry["submission_id"]))
        return EXIT_OK
    return _finish(args, client, client.submission(entry["submission_id"]))


def cmd_profile(args) -> int:
    """Ask for an Nsight Compute report on a submission's kernels, or show the latest."""
    client = client_from_config()
    if args.latest:
        reports = client.ncu_reports(args.id)
        if not reports:
            raise CommandError(f"submission {args.id} has no Nsight Compute report yet",
                               code="not_found")
        report = reports[0]
    else:
        report = client.ncu_request(args.id)
        print(f"Nsight Compute report {report['id']} queued", file=sys.stderr)
    deadline = time.monotonic() + args.timeout
    while args.wait and report["status"] in ("queued", "running"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"report {report['id']} still {report['status']}")
        time.sleep(2)
        report = client.ncu_report(args.id, report["id"])
    text = ncu_text(report)
    if args.text and report.get("text"):
        text += "\n\n" + report["text"]
    emit(args, report, text)
    return EXIT_OK if report["status"] in ("done", "queued", "running") else EXIT_FAILED


CHECK_HELP = ("run the site's evaluation of a kernel file on this machine (verdict, exploits, "
              "notes, diagnosis, timing) before submitting it; needs the site's evaluator")


def check_arguments(parser: argparse.ArgumentParser) -> None:
    """`kb check`'s options, here so that `kb --help` needs no evaluator; the backend and the
    precision are checked by the evaluator's own job rules when the check runs."""
    parser.add_argument("file", help="the kernel file (defines ModelNew)")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--problem", help="the site's problem, by its slug (level1/19_ReLU)")
    where.add_argument("--reference", help="a local KernelBench problem file instead (no site)")
    parser.add_argument("--backend", default="torch",
                        help="the backend it would be submitted as (default torch)")
    parser.add_argument("--precision",
                        help="fp32, fp16 or bf16: the problem's by default (fp32 for a "
                        "--reference file)")
    parser.add_argument("--device", choices=("cpu", "cuda"),
                        help="where to run it: cpu by default, cuda for --backend cuda")
    parser.add_argument("--seed", type=int, help="the inputs' seed (a fresh one by default)")


def cmd_check(args) -> int:
    """`kb check` (kbcli/check.py), imported only now: it runs the site's evaluator, which the
    client's own distribution does not hold (kbcli/pyproject.toml, its `check` extra)."""
    try:
        from kbcli import check
    except ImportError as error:
        raise CommandError(
            f"kb check runs the site's evaluator, which cannot be imported here ({error}): use "
            "the kb of a checkout's environment (make venv; .venv/bin/kb), or install this "
            "client with its extra (pip install './kbcli[check]') and put the checkout on "
            "PYTHONPATH", code="no_evaluator") from None
    return check.cmd_check(args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kb", description=__doc__, epilog=EXIT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.set_defaults(handler=handler)
        sub.add_argument("--json", action="store_true", help="print JSON instead of text")
        return sub

    login = command("login", cmd_login, "save the site's URL and your API token")
    login.add_argument("--url", required=True, help="the site, e.g. https://kb.example.org")
    how = login.add_mutually_exclusive_group()
    how.add_argument("--token", help="the API token (asked for when left out)")
    how.add_argument(
        "--username",
        help="make a new token with your username and password (asked for, or read from "
        "stdin) instead of giving one",
    )

    problems = command("problems", cmd_problems, "list problems")
    problems.add_argument("--level", type=int)
    problems.add_argument("--status",
                          choices=["draft", "validated", "published", "held", "retired"])
    problems.add_argument("--search", help="text in the name or slug")

    problem = command("problem", cmd_problem, "print a problem's reference program")
    problem.add_argument("problem", help="its slug, e.g. level1/19_ReLU (or its level, then "
                         "its number)")
    problem.add_argument("number", type=int, nargs="?")

    command("hardware", cmd_hardware, "list hardware, its backends and queues")

    def name_problem(sub: argparse.ArgumentParser) -> None:
        sub.add_argument("--problem", help="the problem's slug, e.g. level1/19_ReLU")
        sub.add_argument("--level", type=int, help="with --number, instead of --problem")
        sub.add_argument("--number", type=int)

    wait_help = ("follow it live to the outcome: the verdict, then its ranking (a would-be "
                 "record is re-verified before it ranks)")

    def name_kernel(sub: argparse.ArgumentParser, file_help: str) -> None:
        """The kernel file, its problem, backend, hardware and precision (submit and test)."""
        sub.add_argument("file", help=file_help)
        name_problem(sub)
        sub.add_argument("--backend", required=True, help=BACKEND_HELP)
        sub.add_argument("--hardware",
                         help="a hardware slug, e.g. h200 (the site's only one by default)")
        sub.add_argument("--precision", help="fp32, fp16 or bf16 (the problem's by default)")

    submit = command("submit", cmd_submit, "submit a kernel file, or a folder of them")
    submit.epilog = batch.NAMING
    name_kernel(submit, "a kernel file, or a folder of them (see below)")
    submit.add_argument("--wait", action="store_true", help=wait_help)
    submit.add_argument("--timeout", type=float, default=3600, help="seconds to wait at most")

    test = command("test", cmd_test, TEST_HELP)
    name_kernel(test, "a kernel file")
    test.add_argument("--timing", action="store_true",
                      help="time it too (its speedup is shown, never ranked)")
    test.add_argument("--no-wait", action="store_true",
                      help="print its id and return at once instead of following it")
    test.add_argument("--timeout", type=float, default=3600, help="seconds to wait at most")

    status = command("status", cmd_status, "show a submission")
    status.epilog = "Without --wait it exits 0 whenever the submission could be read."
    status.add_argument("id", type=int)
    status.add_argument("--wait", action="store_true", help=wait_help)
    status.add_argument("--timeout", type=float, default=3600)

    listing = command("list", cmd_list, "list your submissions, newest first")
    listing.add_argument("--problem", help="text in the problem's slug, e.g. level1/19_ReLU")
    listing.add_argument("--status", choices=["queued", "running", "finished", "cancelled"])
    listing.add_argument("--verdict", help="e.g. correct, incorrect, compile_error")
    listing.add_argument("--hardware")
    listing.add_argument("--limit", type=int, default=20, help="how many (default 20)")

    reverify = command("reverify", cmd_reverify,
                       "ask for another re-verification of your held result (within the quota)")
    reverify.add_argument("id", type=int)
    reverify.add_argument("--wait", action="store_true", help=wait_help)
    reverify.add_argument("--timeout", type=float, default=3600)

    cancel = command("cancel", cmd_cancel,
                     "cancel a queued or running submission of yours (a running one is "
                     "stopped within seconds; a finished one cannot be cancelled)")
    cancel.add_argument("id", type=int, help="the submission's id, or the batch's with --batch")
    cancel.add_argument("--batch", action="store_true",
                        help="ID is a batch (`kb submit FOLDER` prints it): cancel every "
                        "queued or running submission of it")

    profile = command("profile", cmd_profile,
                      "ask for an Nsight Compute report on a submission's kernels")
    profile.add_argument("id", type=int)
    profile.add_argument("--latest", action="store_true",
                         help="show the latest report instead of asking for a new one")
    profile.add_argument("--wait", action="store_true", help="wait until the report is made")
    profile.add_argument("--text", action="store_true", help="also print ncu's details page")
    profile.add_argument("--timeout", type=float, default=900)

    board = command("leaderboard", cmd_leaderboard, "show a problem's leaderboard")
    name_problem(board)
    board.add_argument("--hardware", help="a hardware slug (the site's only one by default)")
    board.add_argument("--precision", help="fp32, fp16 or bf16: the board of the kernels "
                       "judged in it (the problem's own by default: its main board)")

    command("competitions", cmd_competitions, "list competitions")
    standings = command("standings", cmd_standings, "show a competition's rules and standings")
    standings.add_argument("slug")
    enter = command("enter", cmd_enter, "enter a kernel file in a competition")
    enter.add_argument("slug")
    enter.add_argument("file")
    enter.add_argument("--problem", required=True, help="the problem's slug, e.g. level1/19_ReLU")
    enter.add_argument("--backend", required=True, help=BACKEND_HELP)
    enter.add_argument("--precision", help="fp32, fp16 or bf16")
    enter.add_argument("--wait", action="store_true", help=wait_help)
    enter.add_argument("--timeout", type=float, default=3600, help="seconds to wait at most")

    check_arguments(command("check", cmd_check, CHECK_HELP))
    starter.add_arguments(command("starter", starter.cmd_starter, starter.HELP))
    command("guide", guide.cmd_guide, guide.HELP)
    for sub in commands.choices.values():  # every command's --help ends with what it exits with
        sub.epilog = "\n\n".join(filter(None, [sub.epilog, EXIT_HELP]))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except CommandError as error:
        return fail(args, error.message, error.status, code=error.code, allowed=error.allowed)
    except config.ConfigError as error:
        return fail(args, str(error), code="not_logged_in")
    except ApiError as error:
        # The site's own words and code, and its HTTP status, for a script to act on.
        return fail(args, error.describe(), detail=error.detail, code=error.code,
                    http_status=error.status, allowed=error.allowed, errors=error.errors)
    except requests.RequestException as error:
        return fail(args, f"cannot reach the site: {error}", code="unreachable")
    except TimeoutError as error:
        return fail(args, str(error), code="timeout")
    except KeyboardInterrupt:
        return fail(args, "interrupted (a submission goes on; see `kb status ID`)",
                    code="interrupted")
