"""Every verdict, once: what it means, whether the kernel ran, and how it is shown.

The harness returns one of HARNESS_VERDICTS; the runner stores one of VERDICTS (it adds
runner_crash, for a submission that killed its runners). Evaluation.Verdict, the scoring rule's
"compiled", the KernelBench export's error keys and the generic messages shown to people who
may not see the details are all read from here, so a new verdict is added in this file alone.
"""

from typing import NamedTuple


class Verdict(NamedTuple):
    name: str
    ran: bool  # reached only after the kernel built and ran at least once
    kernelbench_key: str  # the metadata key KernelBench's eval_results.json files its error under
    message: str  # shown instead of the error text to whoever may not see the details
    from_harness: bool = True  # False: stored by the runner, never returned by the harness


ALL: tuple[Verdict, ...] = (
    Verdict("correct", True, "", ""),
    Verdict("incorrect", True, "correctness_issue", "The output did not match the reference."),
    Verdict("compile_error", False, "compilation_error", "The kernel did not compile."),
    Verdict("runtime_error", True, "runtime_error", "The kernel failed while running."),
    Verdict("timeout", True, "runtime_error", "The evaluation ran out of time."),
    Verdict("out_of_memory", True, "runtime_error", "The kernel ran out of memory."),
    Verdict("rejected", False, "other_error", "The kernel was rejected."),
    Verdict(
        "runner_crash", False, "other_error", "The evaluation stopped the runner repeatedly.",
        from_harness=False,
    ),
    Verdict("harness_error", False, "other_error", "The evaluator failed on this submission."),
    # The runner lacks what the problem's reference needs (a package, a model's config): the
    # kernel was not judged, and is not to blame.
    Verdict(
        "problem_unavailable", False, "other_error",
        "This runner cannot run the problem's reference (something it needs is missing).",
    ),
)

BY_NAME = {verdict.name: verdict for verdict in ALL}
VERDICTS = tuple(verdict.name for verdict in ALL)
HARNESS_VERDICTS = tuple(verdict.name for verdict in ALL if verdict.from_harness)
RAN_VERDICTS = frozenset(verdict.name for verdict in ALL if verdict.ran)
