"""How long the leaderboard takes to render at scale.

Fills a separate SQLite database (a temporary folder unless --db names a file) with 100,000
evaluated submissions over 250 problems (models in runs with several samples, and people), builds
the best entries, then times full renders of the pages a visitor opens (boards, tables, problem,
model, person, run, submission and compare pages) through Django's test client, with DEBUG off:

    .venv/bin/python bench/leaderboard_bench.py [--db var/bench.sqlite3] [--keep]

and prints the median and 95th percentile of each. Pages that show a run's tables are timed on a
first view (every cache cleared before each render) and once opened before, as when their tables
were cached (they are now read from the samples kept as results land: the two should agree).
It never touches the site's own database or var folder: it collects static files into its own.
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
# Sources, prompts and answers about the size of real ones (a small kernel is a kilobyte or two),
# so that a page reading them where it needs none pays for it here as it would on the site.
KERNEL = (
    "import torch\nfrom torch.utils.cpp_extension import load_inline\n\n# kernel {i}\n"
    "source = \"\"\"\n" + "__global__ void k(const float* x, float* y, int n) {{ }}\n" * 20
    + "\"\"\"\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
)
PROMPT = "Write a faster kernel for {slug}.\n" + "Reference and instructions. " * 40
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


def setup_django(db_path: Path, var_dir: Path) -> None:
    # Point this process, and only it, at the benchmark's own SQLite file and var folder.
    os.environ.pop("DATABASE_URL", None)
    os.environ["SQLITE_PATH"] = str(db_path)
    os.environ["KBSITE_VAR_DIR"] = str(var_dir)
    # A throwaway site: its own secret key (DEBUG is off unless asked for), and the test
    # client's host allowed the way a deployment allows its own (run_embedded does the same).
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.setdefault("ALLOWED_HOSTS", "testserver")
    os.environ["DJANGO_SETTINGS_MODULE"] = "kbsite.settings"
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    # With DEBUG off the pages name static files through whitenoise's manifest, as `make run`
    # serves them: collected into the bench's own var folder, never the site's.
    call_command("collectstatic", interactive=False, verbosity=0)


def timing_summary(median_ms: float, rng: random.Random) -> dict:
    """A timing summary with the keys the harness stores (evaluator/timing.py), so the
    pages render every column and board ties are computed from a spread."""
    spread = median_ms * rng.uniform(0.002, 0.03)
    return {
        "median_ms": median_ms,
        "mad_ms": spread,
        "mean_ms": median_ms + spread / 2,
        "std_ms": spread * 1.5,
        "min_ms": median_ms - spread * 2,
        "max_ms": median_ms + spread * 5,
        "n": 50,
    }


def fill(total: int, rng: random.Random) -> None:
    from django.contrib.auth import get_user_model
    from django.contrib.auth.hashers import make_password
    from django.utils import timezone

    from evaluation.models import Hardware
    from problems.models import Baseline, Problem, ProblemVersion, source_hash
    from submissions.models import Evaluation, Submission
    from submissions.runs.models import Generation, Model, Run

    # `make run` registers the CPU first; the results are the GPU's, as on a site with one.
    Hardware.objects.create(slug="cpu", name="CPU", kind="cpu")
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
    turns: dict[tuple[int, int, int], int] = {}  # a sample's refinement turns so far
    while made < total:
        submissions, evaluations, steps = [], [], []
        for i in range(made, min(total, made + batch)):
            problem = problems[rng.randrange(len(problems))]
            if i < model_share:
                run = runs[i % len(runs)]
                who = {"model": run.model, "run": run, "sample_index": (i // len(runs)) % 10}
                ability = skill[run.model_id]
                sample = (run.pk, problem.pk, who["sample_index"])
                turns[sample] = turns.get(sample, -1) + 1
                steps.append((run, problem, who["sample_index"], turns[sample]))
            else:
                user = users[rng.randrange(len(users))]
                who = {"user": user}
                steps.append(None)
                ability = skill[user.pk]
            verdict = rng.choices(names, weights)[0]
            finished = start + timedelta(seconds=i * 77)
            source = KERNEL.format(i=i)
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
                    "candidate_stats": timing_summary(candidate, rng) if timed else None,
                    "reference_stats": timing_summary(ref, rng) if timed else None,
                    "flags": flags,
                    # Five correctness trials, as KernelBench runs by default.
                    "trials": [
                        {"k": k, "passed": verdict == "correct", "max_abs_diff": 1e-5 * k,
                         "mean_abs_diff": 1e-7 * k}
                        for k in range(1, 6)
                    ] if timed else [],
                    "finished_at": finished,
                }
            )
        submissions = Submission.objects.bulk_create(submissions)
        # What the run wrote for each of its samples: the prompt and the answer with the code.
        generations = []
        for submission, step in zip(submissions, steps, strict=True):
            if step is None:  # a person's
                continue
            run, problem, index, turn = step
            generations.append(
                Generation(
                    run=run,
                    problem=problem,
                    sample_index=index,
                    turn=turn,
                    status=Generation.Status.DONE,
                    prompt=PROMPT.format(slug=problem.slug),
                    response=f"```python\n{submission.source}```\n",
                    submission=submission,
                    finished_at=submission.finished_at,
                )
            )
        Generation.objects.bulk_create(generations)
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


def timed(label: str, fn, repeat: int, before=None) -> None:
    fn()  # warm caches (templates, the connection) before measuring
    samples, cpu = [], []
    for _ in range(repeat):
        if before is not None:
            before()
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
    p95 = statistics.quantiles(samples, n=100, method="inclusive")[94]
    # The process's own CPU time (SQLite runs in it) beside the wall time: on a machine shared
    # with other work, the wall time's tail is mostly the others'.
    print(
        f"{label:<48} median {statistics.median(samples):8.1f} ms   p95 {p95:8.1f} ms   "
        f"cpu median {statistics.median(cpu):6.1f} ms   (n={repeat})"
    )


def main() -> None:
    args = parse_args()
    # The bench's own var folder (static files, keys), and its database there unless --db.
    folder = tempfile.TemporaryDirectory(prefix="kbsite-bench-")
    db_path = Path(args.db).resolve() if args.db else Path(folder.name) / "bench.sqlite3"
    filled = args.keep and db_path.exists()
    if not filled and db_path.exists():
        sys.exit(f"{db_path} exists; pass --keep to reuse it or name a new file")
    setup_django(db_path, Path(folder.name) / "var")

    from django.contrib.auth import get_user_model
    from django.core.cache import cache
    from django.core.management import call_command
    from django.db.models import Count
    from django.test import Client

    from leaderboard.models import BestEntry
    from leaderboard.services import board_refresh_for, boards_rebuild
    from problems.models import Problem
    from submissions.models import Evaluation, Submission
    from submissions.runs.models import Model, Run
    from submissions.runs.samples import run_samples_rebuild

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
        t0 = time.perf_counter()
        samples = run_samples_rebuild()
        print(f"run_samples_rebuild: {samples} run samples in {time.perf_counter() - t0:.1f} s")
    else:
        # A kept database gets the indexes and kept tables added since (their migrations fill
        # the tables from what is there).
        call_command("migrate", verbosity=0)
    print(
        f"{Submission.objects.count()} submissions, {Problem.objects.count()} problems, "
        f"{BestEntry.objects.count()} best entries"
    )
    # The site's app, built as the server builds it at start (kbsite/asgi.py, which freezes
    # what it built out of the garbage collector's reach), though the test client below calls
    # Django's handler directly.
    import kbsite.asgi  # noqa: F401

    # What a visitor opens, each render a random one of its kind (a problem, a model, a person,
    # a submission), so the 95th percentile covers the large ones too.
    anonymous = Client()
    signed_in = Client()
    busiest = get_user_model().objects.annotate(n=Count("submissions")).order_by("-n").first()
    signed_in.force_login(busiest)
    problems = list(Problem.objects.values_list("level", "number"))
    model_ids = list(Model.objects.values_list("pk", flat=True))
    run_ids = list(Run.objects.values_list("pk", flat=True))
    usernames = list(get_user_model().objects.values_list("username", flat=True))
    last = Submission.objects.order_by("-pk").values_list("pk", flat=True).first()
    same_problem = list(
        Submission.objects.filter(problem__level=1, problem__number=1).values_list("pk", flat=True)
    )

    def board() -> str:
        level, number = rng.choice(problems)
        return f"/leaderboard/{level}/{number}/h200/"

    def problem() -> str:
        level, number = rng.choice(problems)
        return f"/problems/{level}/{number}/"

    def compare() -> str:
        a, b = rng.sample(same_problem, 2)
        return f"/leaderboard/compare/?a={a}&b={b}"

    def model_page() -> str:
        return f"/leaderboard/models/{rng.choice(model_ids)}/"

    def run_table() -> str:
        return f"/leaderboard/runs/{rng.choice(run_ids)}/"

    def run_page() -> str:
        return f"/runs/{rng.choice(run_ids)}/"

    def opened_before(pages: list[str]):
        """Each of these pages opened once, as on a site in use (whatever they cache, cached)."""

        def visit() -> None:
            for page in pages:
                anonymous.get(page)

        return visit

    # (label, client, address, before timing: what to do first, once; before each render)
    pages = [
        ("home page /", anonymous, lambda: "/", None, None),
        ("leaderboards index /leaderboard/", anonymous, lambda: "/leaderboard/", None, None),
        ("models table JSON API", anonymous, lambda: "/api/v1/leaderboard/models/", None, None),
        ("a board (random problem)", anonymous, board, None, None),
        ("people table /leaderboard/people/", anonymous, lambda: "/leaderboard/people/", None,
         None),
        # Pages that show a run's tables are timed on a first view (nothing cached) and once
        # opened before, the figures kept comparable with those from when the tables were cached.
        ("a model's page, first view", anonymous, model_page, None, cache.clear),
        ("a model's page, opened before", anonymous, model_page,
         opened_before([f"/leaderboard/models/{pk}/" for pk in model_ids]), None),
        ("a run's table, first view", anonymous, run_table, None, cache.clear),
        ("a run's table, opened before", anonymous, run_table,
         opened_before([f"/leaderboard/runs/{pk}/" for pk in run_ids]), None),
        ("a run's page, first view", anonymous, run_page, None, cache.clear),
        ("a run's page, opened before", anonymous, run_page,
         opened_before([f"/runs/{pk}/" for pk in run_ids]), None),
        ("runs list /runs/", anonymous, lambda: "/runs/", None, None),
        ("a person's page (random user)", anonymous,
         lambda: f"/leaderboard/users/{rng.choice(usernames)}/", None, None),
        ("problems list /problems/", anonymous, lambda: "/problems/", None, None),
        ("problems list, signed in", signed_in, lambda: "/problems/", None, None),
        ("a problem page (random problem)", anonymous, problem, None, None),
        ("a submission page (random submission)", anonymous,
         lambda: f"/submissions/{rng.randint(1, last)}/", None, None),
        ("compare two submissions (same problem)", anonymous, compare, None, None),
    ]
    for label, client, url, first, before in pages:

        def fetch(client=client, url=url) -> None:
            address = url()
            response = client.get(address)
            assert response.status_code == 200, (address, response.status_code)

        cache.clear()
        if first is not None:
            first()
        timed(label, fetch, args.repeat, before=before)

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
    folder.cleanup()


if __name__ == "__main__":
    main()
