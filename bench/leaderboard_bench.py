"""How long the leaderboard takes to render at scale.

Fills a separate SQLite database (a temporary folder unless --db names a file) with 100,000
evaluated submissions over 250 problems (models in runs with several samples, and people), builds
the best entries, then times full page renders through Django's test client:

    .venv/bin/python bench/leaderboard_bench.py [--db var/bench.sqlite3] [--keep]

and prints the median and 95th percentile of each. It never touches the site's own database.
"""

import argparse
import os
import random
import secrets
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

LEVELS = {1: 100, 2: 100, 3: 50}  # 250 problems, like KernelBench's first three levels
MODELS = 20
USERS = 400
VERDICTS = (  # (verdict, weight); a share of correct ones carry an exploit flag
    ("correct", 55),
    ("incorrect", 20),
    ("compile_error", 15),
    ("runtime_error", 5),
    ("timeout", 2),
    ("rejected", 3),
)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="SQLite file to fill (default: a temporary folder)")
    parser.add_argument("--submissions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=200, help="renders per measurement")
    parser.add_argument("--keep", action="store_true", help="reuse --db if already filled")
    parser.add_argument("--seed", type=int, default=7)
    return parser.parse_args()


def setup_django(db_path: Path) -> None:
    # Point this process, and only it, at the benchmark's own SQLite file.
    os.environ.pop("DATABASE_URL", None)
    os.environ["SQLITE_PATH"] = str(db_path)
    # A throwaway site: its own secret key (DEBUG is off unless asked for).
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ["DJANGO_SETTINGS_MODULE"] = "kbsite.settings"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()


def fill(total: int, rng: random.Random) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.utils import timezone

    from evaluation.models import Hardware
    from problems.models import Baseline, Problem, ProblemVersion, source_hash
    from submissions.models import Evaluation, Model, Run, Submission

    hardware = Hardware.objects.create(slug="h200", name="NVIDIA H200", kind="gpu")
    now = timezone.now()
    problems = Problem.objects.bulk_create(
        Problem(
            slug=f"level{level}/{n}_P{n}",
            level=level,
            number=n,
            name=f"P{n}",
            status=Problem.Status.PUBLISHED,
        )
        for level, count in LEVELS.items()
        for n in range(1, count + 1)
    )
    versions = ProblemVersion.objects.bulk_create(
        ProblemVersion(
            problem=p, version=1, source=f"# {p.slug}\n", source_hash=source_hash(f"# {p.slug}\n")
        )
        for p in problems
    )
    for problem, version in zip(problems, versions, strict=True):
        problem.current_version = version
    Problem.objects.bulk_update(problems, ["current_version"])
    reference_ms = {p.pk: rng.lognormvariate(0, 1.2) for p in problems}
    Baseline.objects.bulk_create(
        Baseline(problem=p, hardware=hardware, mode=mode, median_ms=reference_ms[p.pk] * factor)
        for p in problems
        for mode, factor in (("eager", 1.0), ("compile", 0.8))
    )
    password = make_password("bench-password-1")
    users = get_user_model().objects.bulk_create(
        get_user_model()(username=f"user{i}", password=password) for i in range(USERS)
    )
    models = Model.objects.bulk_create(
        Model(litellm_name=f"provider/model-{i}", display_name=f"Model {i}") for i in range(MODELS)
    )
    runs = Run.objects.bulk_create(
        Run(
            name=f"sweep-{m.pk}",
            model=m,
            hardware=hardware,
            samples_per_problem=10,
            status=Run.Status.FINISHED,
        )
        for m in models
    )
    for run in runs:
        run.problems.set(problems)
    skill = {m.pk: rng.uniform(0.3, 0.8) for m in models} | {
        u.pk: rng.uniform(0.2, 0.9) for u in users
    }

    names, weights = zip(*VERDICTS, strict=True)
    model_share = int(total * 0.6)
    start = now - timedelta(days=90)
    batch = 5000
    made = 0
    while made < total:
        submissions, evaluations = [], []
        for i in range(made, min(total, made + batch)):
            problem = problems[rng.randrange(len(problems))]
            if i < model_share:
                run = runs[i % len(runs)]
                who = {"model": run.model, "run": run, "sample_index": (i // len(runs)) % 10}
                ability = skill[run.model_id]
            else:
                user = users[rng.randrange(len(users))]
                who = {"user": user}
                ability = skill[user.pk]
            verdict = rng.choices(names, weights)[0]
            finished = start + timedelta(seconds=i * 77)
            source = f"# kernel {i}\n"
            submissions.append(
                Submission(
                    problem=problem,
                    problem_version_id=problem.current_version_id,
                    hardware=hardware,
                    backend="cuda",
                    source=source,
                    source_hash=source_hash(source),
                    status=Submission.Status.FINISHED,
                    verdict=verdict,
                    created_at=finished,
                    finished_at=finished,
                    **who,
                )
            )
            ref = reference_ms[problem.pk]
            timed = verdict in ("correct", "incorrect", "rejected")
            candidate = ref / rng.lognormvariate(ability - 0.4, 0.6) if timed else None
            flags = ["timing_underreported"] if verdict == "rejected" else []
            if verdict == "correct" and rng.random() < 0.03:
                flags = ["extra_streams"]
            speedup = ref / candidate if candidate and verdict == "correct" else None
            evaluations.append(
                {
                    "verdict": verdict,
                    "correct": verdict == "correct",
                    "candidate_median_ms": candidate,
                    "reference_median_ms": ref if timed else None,
                    "speedup": speedup,
                    "speedup_eager": speedup,
                    "speedup_compile": 0.8 * speedup if speedup else None,
                    "candidate_stats": (
                        {"median_ms": candidate, "mean_ms": candidate, "n": 50} if timed else None
                    ),
                    "flags": flags,
                    "trials": [{"k": 1, "passed": verdict == "correct"}] if timed else [],
                    "finished_at": finished,
                }
            )
        submissions = Submission.objects.bulk_create(submissions)
        Evaluation.objects.bulk_create(
            Evaluation(
                submission=s,
                attempt=1,
                hardware=hardware,
                problem_version_id=s.problem_version_id,
                source_hash=s.source_hash,
                **fields,
            )
            for s, fields in zip(submissions, evaluations, strict=True)
        )
        made += len(submissions)
        print(f"  {made} submissions", end="\r", flush=True)
    print()


def timed(label: str, fn, repeat: int) -> None:
    fn()  # warm caches (templates, the connection) before measuring
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    p95 = statistics.quantiles(samples, n=100, method="inclusive")[94]
    print(
        f"{label:<48} median {statistics.median(samples):8.1f} ms   p95 {p95:8.1f} ms   "
        f"(n={repeat})"
    )


def main() -> None:
    args = parse_args()
    folder = None
    if args.db:
        db_path = Path(args.db).resolve()
    else:
        folder = tempfile.TemporaryDirectory(prefix="kbsite-bench-")
        db_path = Path(folder.name) / "bench.sqlite3"
    filled = args.keep and db_path.exists()
    if not filled and db_path.exists():
        sys.exit(f"{db_path} exists; pass --keep to reuse it or name a new file")
    setup_django(db_path)

    from django.core.management import call_command
    from django.test import Client

    from leaderboard.models import BestEntry
    from leaderboard.services import board_refresh_for, boards_rebuild
    from problems.models import Problem
    from submissions.models import Evaluation, Model, Submission

    rng = random.Random(args.seed)
    print(f"database: {db_path}")
    if not filled:
        call_command("migrate", verbosity=0)
        t0 = time.perf_counter()
        fill(args.submissions, rng)
        print(f"filled in {time.perf_counter() - t0:.1f} s")
        t0 = time.perf_counter()
        entries = boards_rebuild()
        print(f"boards_rebuild: {entries} best entries in {time.perf_counter() - t0:.1f} s")
    print(
        f"{Submission.objects.count()} submissions, {Problem.objects.count()} problems, "
        f"{BestEntry.objects.count()} best entries"
    )

    client = Client()
    problems = list(Problem.objects.values_list("level", "number"))
    model = Model.objects.first()

    def board_page():
        level, number = rng.choice(problems)
        response = client.get(f"/leaderboard/{level}/{number}/h200/")
        assert response.status_code == 200, response.status_code

    def get(url: str):
        def fetch():
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)

        return fetch

    timed("per-problem board page (random problem)", board_page, args.repeat)
    timed("models table page /leaderboard/", get("/leaderboard/"), args.repeat)
    timed("models table JSON API", get("/api/v1/leaderboard/models/"), args.repeat)
    samples = Submission.objects.filter(model=model).count()
    timed(
        f"one model's page ({samples} submissions in its run)",
        get(f"/leaderboard/models/{model.pk}/"),
        max(10, args.repeat // 10),
    )

    # The write side: what storing one more result costs (board_refresh_for in the runner's
    # transaction), measured on copies of existing evaluations.
    from django.db import transaction

    sources = list(
        Evaluation.objects.order_by("?")[:50].select_related(
            "submission__problem", "submission__user", "submission__model", "hardware"
        )
    )

    def refresh_once():
        evaluation = sources.pop()
        with transaction.atomic():
            board_refresh_for(evaluation)

    timed("board_refresh_for (one stored result)", refresh_once, len(sources) - 1)
    if folder is not None:
        folder.cleanup()


if __name__ == "__main__":
    main()
