"""`kb guide`: what an LLM agent needs to use the site, printed for its prompt.

Short on purpose: the loop of commands, the file the judge expects, how to read a result, the
exit statuses and the HTTP endpoints behind them. It makes no request, so it works before
`kb login`. Its lists are checked against the site by tests/test_cli_agents.py: every endpoint
resolves in the URL conf to a view that takes its method, the backends and verdicts are the
evaluator's, the ranking details the API's.
"""

import argparse
import json

from kbcli import config, exits

HELP = "print instructions for an LLM agent: the commands, the file contract, reading a verdict"

# (method, path, what it is). {slug} is a problem's slug, level1/19_ReLU; {id} a submission's.
ENDPOINTS: tuple[tuple[str, str, str], ...] = (
    ("POST", "/api/v1/tokens/", "a new API token, with HTTP Basic (username and password)"),
    ("GET", "/api/v1/problems/", "the problems (?level=1&q=TEXT): slug, level, number"),
    ("GET", "/api/v1/problems/{slug}/", "a problem: its reference `source`, `precision`, "
                                        "`tolerances`"),
    ("GET", "/api/v1/problems/{slug}/starter/", "a starter kernel (?backend=B): `source`, "
                                                "`filename`"),
    ("GET", "/api/v1/hardware/", "the hardware: `backends` it runs, its queue"),
    ("GET", "/api/v1/quota/", "your quotas, how much of them is used, and the size "
                              "limit on a kernel file (max_source_bytes)"),
    ("POST", "/api/v1/submissions/", "submit: problem, backend, source (hardware, precision, "
                                     "test_run, timing); send an Idempotency-Key header"),
    ("POST", "/api/v1/submissions/batch/", "up to 100 submissions at once, all or none"),
    ("GET", "/api/v1/submissions/", "your submissions, newest first"),
    ("GET", "/api/v1/submissions/{id}/", "a submission: poll it until `settled` is true"),
    ("GET", "/api/v1/submissions/{id}/events/", "its changes as server-sent events, until "
                                                "settled"),
    ("POST", "/api/v1/submissions/{id}/cancel/", "cancel it while it is queued or running"),
    ("GET", "/api/v1/leaderboard/boards/{slug}/{hardware}/", "a problem's board on a hardware"),
    ("GET", "/api/schema/", "the OpenAPI schema of all of it"),
)

# The evaluator's backends (evaluator/backends), named here because the client holds no
# evaluator; a test keeps the two the same.
BACKENDS: dict[str, str] = {
    "cuda": "CUDA C++ through torch.utils.cpp_extension.load_inline",
    "triton": "@triton.jit kernels",
    "helion": "@helion.kernel functions (pin a helion.Config: autotuning takes minutes)",
    "tilelang": "@T.prim_func programs, usually built by @tilelang.jit",
    "cute": "CuTe DSL: @cute.kernel launched from a @cute.jit function, cute.compile'd once",
    "cutile": "@ct.kernel functions launched with ct.launch",
    "cpp": "C++ through load_inline, on a CPU",
    "torch": "plain PyTorch, no kernel of its own",
}

# Every verdict (evaluator/verdicts.py) and where to look next.
VERDICTS: dict[str, str] = {
    "correct": "every trial matched the reference; see speedup and ranking",
    "incorrect": "an output did not match: evaluation.diagnosis says where and how (pattern, "
                 "hint, the worst elements)",
    "compile_error": "it did not build: evaluation.compile_log",
    "runtime_error": "it failed while running: error, evaluation.traceback",
    "timeout": "the evaluation ran out of time (a slow build or kernel, or a hang)",
    "out_of_memory": "it ran out of device or host memory",
    "rejected": "the judge refused what it did: error names the check",
    "runner_crash": "it stopped the runner repeatedly",
    "harness_error": "the evaluator failed, not the kernel: submit it again",
    "problem_unavailable": "the runner cannot run this problem's reference; not the kernel's "
                           "fault",
}

# The API's ranking.detail (submissions.selectors.RankingDetail), under ranking.state.
RANKING: dict[str, tuple[str, str]] = {
    "ranked": ("ranked", "on the board at ranking.rank"),
    "pending_reverification": ("pending", "a would-be record, evaluated again with fresh seeds "
                                          "before it ranks"),
    "not_evaluated": ("pending", "no result yet"),
    "timing_not_reproduced": ("held", "its timings did not agree (from before such results "
                                      "ranked): `kb reverify ID` asks again"),
    "timing_unconfirmed": ("held", "the judge's clock confirmed none of its timings: "
                                   "`kb reverify ID` asks again"),
    "failed_reverification": ("off_board", "its re-verification was not correct or was "
                                           "flagged"),
    "flagged": ("off_board", "an exploit flag (flags)"),
    "not_correct": ("off_board", "the verdict is not correct"),
    "not_timed": ("off_board", "correct but not timed"),
    "test_run": ("off_board", "a test run, never ranked"),
    "cancelled": ("off_board", "cancelled before its verdict"),
}


def endpoint_lines() -> list[str]:
    return [f"  {method:<5}{path:<48}{what}" for method, path, what in ENDPOINTS]


def text(site: str) -> str:
    """The guide, for the site at `site` (or how to name one)."""
    lines = [
        "kb guide: submitting kernels to a kbsite (KernelBench-style evaluation)",
        "",
        f"Site: {site}",
        "Every command takes --json: stdout is then one JSON document, an error as "
        '{"error": {"detail", "code", ...}}; progress and messages go to stderr.',
        "",
        "The loop",
        "  kb problems --level 1 --json                    the problems, by slug (level1/19_ReLU)",
        "  kb problem SLUG --json                          its reference: source, tolerances",
        "  kb hardware --json                              the hardware and the backends it runs",
        "  kb starter --problem SLUG --backend B -o DIR    a ModelNew the judge finds correct",
        "  kb test FILE --problem SLUG --backend B --json  checked on the site, never ranked "
        "(--timing times it)",
        "  kb submit FILE --problem SLUG --backend B --wait --json   judged, then ranked",
        "  kb status ID --json, kb list --json, kb cancel ID, kb leaderboard --problem SLUG",
        "  kb check FILE --problem SLUG --json             the site's evaluation on this machine "
        "(needs the site's evaluator)",
        "",
        "The file",
        "  One UTF-8 Python file defining class ModelNew(torch.nn.Module). The problem's "
        "reference defines class Model, get_init_inputs() and get_inputs(): ModelNew is built "
        "with Model's arguments, called with its inputs, and returns the same outputs within the "
        "problem's atol and rtol for its precision (tolerances).",
        "  Inputs are fresh random draws from secret seeds on every call: compute from them; "
        "a cached or constant output is incorrect.",
        "  `kb starter` gives one that is correct as it is (it calls the reference through a "
        "copy kernel of the backend): write the computation into its kernel, then drop the "
        "call to the reference.",
        "  --backend names the language of its kernels; every backend but torch must run kernels "
        "of its own in ModelNew's call, or the result is flagged backend_not_used:",
        *[f"    {name:<10}{what}" for name, what in BACKENDS.items()],
        "  A file that is not valid Python, or defines no ModelNew, is refused at once (HTTP "
        "400: syntax_error with its line, or no_model_new); one over the site's size limit "
        "(max_source_bytes of GET /api/v1/quota/) with 413 too_large; `kb submit` refuses it "
        "before sending it.",
        "",
        "Reading a result (kb status ID --json; GET /api/v1/submissions/{id}/)",
        "  status: queued, running, finished or cancelled. Wait for settled: true, not for "
        "finished: a would-be record is evaluated again with fresh seeds before it ranks.",
        "  verdict:",
        *[f"    {name:<21}{what}" for name, what in VERDICTS.items()],
        "  speedup: the reference's median time over the kernel's, timed side by side (above 1 "
        "is faster). flags: exploits, each keeps it off the boards; notes are not exploits.",
        "  ranking.state (ranked, pending, held, off_board), ranking.detail (why), "
        "ranking.reason (in words):",
        *[f"    {detail:<24}{state}: {what}" for detail, (state, what) in RANKING.items()],
        "",
        "Exit statuses",
        *[f"  {code}  {meaning}" for code, meaning in exits.MEANINGS.items()],
        "",
        "The HTTP API behind kb (Authorization: Bearer TOKEN)",
        *endpoint_lines(),
    ]
    return "\n".join(lines) + "\n"


def site_line() -> str:
    try:
        saved = config.load()
    except config.ConfigError:
        return "not logged in: kb login --url URL --token TOKEN (or set KB_URL and KB_TOKEN)"
    return f"{saved.url} (logged in)"


def cmd_guide(args: argparse.Namespace) -> int:
    site = site_line()
    if args.json:
        print(json.dumps({
            "site": site,
            "text": text(site),
            "endpoints": [{"method": m, "path": p, "what": w} for m, p, w in ENDPOINTS],
            "backends": BACKENDS,
            "verdicts": VERDICTS,
            "ranking": {detail: {"state": state, "what": what}
                        for detail, (state, what) in RANKING.items()},
            "exit_codes": {str(code): meaning for code, meaning in exits.MEANINGS.items()},
        }, indent=2))
    else:
        print(text(site), end="")
    return exits.OK
