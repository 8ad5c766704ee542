"""Talking to language models through litellm: prompts, calls with retries, code extraction.

Nothing here touches the database; `submissions.runs.services` loads rows, calls these, stores
results.
"""

import json
import os
import random
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

# litellm fetches its price list from the internet unless told otherwise; ours has none.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # (must come after the environment variable above)

from evaluator import backends
from evaluator import flags as flag_kinds

# Test and offline switch: a JSON file of canned answers, handed to litellm's own
# `mock_response` so no provider is called. Never set in a real deployment.
MOCK_FILE_ENV = "LLM_MOCK_RESPONSES_FILE"

# Provider trouble that goes away by waiting; anything else (bad key, bad request, unknown
# model, context too long) fails at once because retrying cannot help.
RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    litellm.RateLimitError,
    litellm.Timeout,
    litellm.APIConnectionError,
    litellm.ServiceUnavailableError,
    litellm.InternalServerError,
    litellm.BadGatewayError,
)
NON_RETRYABLE_ERRORS: tuple[type[Exception], ...] = (
    litellm.BadRequestError,
    litellm.AuthenticationError,
    litellm.PermissionDeniedError,
    litellm.NotFoundError,
    litellm.UnprocessableEntityError,
)


class LLMFailure(Exception):
    """A call that gave no answer: a provider error not worth retrying, or retries used up."""

    def __init__(self, message: str, *, tries: int) -> None:
        super().__init__(message)
        self.message = message
        self.tries = tries


@dataclass(frozen=True)
class Answer:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    tries: int  # calls made, the successful one included


@dataclass(frozen=True)
class ModelSettings:
    """What a call needs to know about a registered model (a submissions.models.Model)."""

    litellm_name: str
    api_key_env: str = ""
    api_base_env: str = ""


def _setting(name: str, default):
    return getattr(settings, name, default)


def is_retryable(error: Exception) -> bool:
    if isinstance(error, NON_RETRYABLE_ERRORS):
        return False
    if isinstance(error, RETRYABLE_ERRORS):
        return True
    # A bare APIError carries the provider's HTTP status: 5xx and 429 are worth a retry.
    status = getattr(error, "status_code", None)
    return isinstance(error, litellm.APIError) and isinstance(status, int) and (
        status >= 500 or status == 429
    )


def retry_delay(error: Exception, *, try_number: int, base: float, cap: float) -> float:
    """Exponential backoff with jitter; a provider's Retry-After wins when it asks for longer."""
    delay = min(cap, base * (2 ** (try_number - 1)))
    delay = delay * (0.5 + random.random() / 2)
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or getattr(error, "headers", None) or {}
    try:
        asked = float(headers.get("retry-after", 0))
    except (TypeError, ValueError, AttributeError):
        asked = 0.0
    return min(cap, max(delay, asked))


def _describe(error: Exception) -> str:
    return f"{type(error).__name__}: {error}"


def _provider_kwargs(model: ModelSettings) -> dict:
    """The key and base URL come from environment variables the model names, never the DB."""
    kwargs = {}
    for env_name, argument in ((model.api_key_env, "api_key"), (model.api_base_env, "api_base")):
        if not env_name:
            continue
        value = os.environ.get(env_name)
        if not value:
            raise LLMFailure(
                f"The environment variable {env_name} (the {argument} of {model.litellm_name})"
                " is not set on the generation workers.",
                tries=0,
            )
        kwargs[argument] = value
    return kwargs


def _cost(response) -> float:
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    if cost is None:
        try:
            cost = litellm.completion_cost(completion_response=response)
        except Exception:  # a model missing from litellm's price list: the tokens still count
            cost = 0.0
    return float(cost or 0.0)


def complete(
    *,
    model: ModelSettings,
    messages: list[dict],
    temperature: float,
    mock: Callable[[int], dict] | None = None,
    deadline: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Answer:
    """Ask the model once, retrying rate limits and provider errors with backoff.

    `mock(try_number)` gives litellm's mock arguments (`mock_response`, `mock_delay`) for each
    try: tests and offline runs.
    `deadline` (a time.monotonic() value) bounds the whole call, retries included, so the
    queue's hard timeout never kills a worker mid-call.
    """
    max_tries = int(_setting("LLM_MAX_ATTEMPTS", 5))
    base = float(_setting("LLM_RETRY_BASE_SECONDS", 2.0))
    cap = float(_setting("LLM_RETRY_MAX_SECONDS", 60.0))
    request_timeout = float(_setting("LLM_REQUEST_TIMEOUT", 300.0))
    kwargs = _provider_kwargs(model)
    last_error = ""
    for try_number in range(1, max_tries + 1):
        timeout = request_timeout
        if deadline is not None:
            timeout = min(timeout, deadline - time.monotonic())
            if timeout <= 1:
                raise LLMFailure(f"Out of time after {try_number - 1} tries. {last_error}".strip(),
                                 tries=try_number - 1)
        call = dict(kwargs)
        if mock is not None:
            call.update(mock(try_number))
        try:
            response = litellm.completion(
                model=model.litellm_name,
                messages=messages,
                temperature=temperature,
                timeout=timeout,
                num_retries=0,  # the loop here retries, with backoff we control and can test
                **call,
            )
        except Exception as error:
            last_error = _describe(error)
            if not is_retryable(error):
                raise LLMFailure(last_error, tries=try_number) from error
            if try_number == max_tries:
                break
            delay = retry_delay(error, try_number=try_number, base=base, cap=cap)
            if deadline is not None and time.monotonic() + delay >= deadline:
                break
            sleep(delay)
            continue
        usage = getattr(response, "usage", None)
        text = response.choices[0].message.content or ""
        return Answer(
            text=text,
            prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
            completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
            cost_usd=_cost(response),
            tries=try_number,
        )
    raise LLMFailure(f"Gave up after {try_number} tries. Last error: {last_error}",
                     tries=try_number)


# ---- canned answers (litellm's mock_response) -------------------------------------------------

MOCK_ERRORS: dict[str, Callable[[str, str], Exception]] = {
    "rate_limit": lambda m, msg: litellm.RateLimitError(msg, llm_provider="mock", model=m),
    "unavailable": lambda m, msg: litellm.ServiceUnavailableError(
        msg, llm_provider="mock", model=m
    ),
    "timeout": lambda m, msg: litellm.Timeout(msg, model=m, llm_provider="mock"),
    "bad_request": lambda m, msg: litellm.BadRequestError(msg, model=m, llm_provider="mock"),
    "auth": lambda m, msg: litellm.AuthenticationError(msg, llm_provider="mock", model=m),
}


def mock_for(*, model: str, problem: str, sample: int, turn: int) -> Callable[[int], dict] | None:
    """The canned answers for one step, when LLM_MOCK_RESPONSES_FILE names a file; else None.

    The file maps keys to answers. Keys, most specific first: "<slug>#sample<S>#turn<T>",
    "<slug>#turn<T>", "<slug>#sample<S>", "<slug>", "*". An answer is a string; an error
    {"raise": "rate_limit" | "unavailable" | "timeout" | "bad_request" | "auth", "message": ...};
    or {"answer": text, "delay": seconds}. A list gives one per try (the last one repeats).
    """
    path = os.environ.get(MOCK_FILE_ENV)
    if not path:
        return None
    try:
        table = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise LLMFailure(f"Cannot read the canned answers in {path}: {error}", tries=0) from None
    keys = (
        f"{problem}#sample{sample}#turn{turn}",
        f"{problem}#turn{turn}",
        f"{problem}#sample{sample}",
        problem,
        "*",
    )
    entry = next((table[key] for key in keys if key in table), None)
    if entry is None:
        raise LLMFailure(f"{path} has no canned answer for {keys[0]}.", tries=0)
    answers = entry if isinstance(entry, list) else [entry]

    def pick(try_number: int) -> dict:
        answer = answers[min(try_number, len(answers)) - 1]
        if not isinstance(answer, dict):
            return {"mock_response": str(answer)}
        if "raise" in answer:
            kind = answer["raise"]
            if kind not in MOCK_ERRORS:
                known = ", ".join(MOCK_ERRORS)
                raise LLMFailure(f"Unknown canned error {kind!r}; known: {known}.", tries=0)
            return {"mock_response": MOCK_ERRORS[kind](model, answer.get("message", kind))}
        return {"mock_response": str(answer["answer"]), "mock_delay": answer.get("delay")}

    return pick


# ---- prompts ----------------------------------------------------------------------------------

EXAMPLE_PROBLEM = '''import torch
import torch.nn as nn


class Model(nn.Module):
    """Scales a tensor and adds a bias, element by element."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return x * self.scale + bias


def get_inputs():
    return [torch.randn(4096, 1024), torch.randn(4096, 1024)]


def get_init_inputs():
    return [0.5]
'''

EXAMPLE_CUDA = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

scale_add_source = r"""
#include <torch/extension.h>

__global__ void scale_add_kernel(const float* x, const float* bias, float* out,
                                 float scale, long n) {
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        out[i] = x[i] * scale + bias[i];
    }
}

torch::Tensor scale_add(torch::Tensor x, torch::Tensor bias, double scale) {
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto out = torch::empty_like(xc);
    long n = xc.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    scale_add_kernel<<<blocks, threads>>>(xc.data_ptr<float>(), bc.data_ptr<float>(),
                                          out.data_ptr<float>(), (float)scale, n);
    return out;
}
"""

scale_add_declaration = (
    "torch::Tensor scale_add(torch::Tensor x, torch::Tensor bias, double scale);"
)

scale_add_module = load_inline(
    name="scale_add_example",
    cpp_sources=scale_add_declaration,
    cuda_sources=scale_add_source,
    functions=["scale_add"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return scale_add_module.scale_add(x, bias, self.scale)
'''

EXAMPLE_TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_add_kernel(x_ptr, bias_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    bias = tl.load(bias_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * scale + bias, mask=mask)


def scale_add(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    x = x.contiguous()
    bias = bias.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    grid = (triton.cdiv(n, 1024),)
    scale_add_kernel[grid](x, bias, out, scale, n, BLOCK=1024)
    return out


class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        return scale_add(x, bias, self.scale)
'''

BACKEND_WORDS = {backend.name: backend.summary for backend in backends.BACKENDS.values()}


def build_prompt(*, reference_source: str, backend: str, prompt_style: str) -> str:
    """KernelBench's one-shot style: an example problem and its rewrite, then the task."""
    example = EXAMPLE_TRITON if prompt_style == "triton" else EXAMPLE_CUDA
    example_kind = "Triton" if prompt_style == "triton" else "inline CUDA"
    words = BACKEND_WORDS.get(backend, BACKEND_WORDS["cuda"])
    return (
        f"Your job is to make a PyTorch program faster by rewriting it with {words}. You may "
        "replace any of its operators, fuse several into one kernel, or change the algorithm "
        "(an online softmax, for instance), as long as the result stays the same.\n\n"
        f"Here is an example of the format, with an {example_kind} kernel. The example "
        f"program:\n\n```python\n{EXAMPLE_PROBLEM}```\n\n"
        f"The same program rewritten, as a class named ModelNew:\n\n```python\n{example}```\n\n"
        f"Now the program to rewrite:\n\n```python\n{reference_source.rstrip()}\n```\n\n"
        "Write the class ModelNew, with the same constructor arguments and forward inputs as "
        "Model, and return the same outputs (shape, dtype, device, values within tolerance). "
        "Answer with one Python code block holding the complete file: imports, kernels and "
        "ModelNew. Real, working code only: no pseudocode, no tests, no example usage."
    )


LOG_LIMIT = 4000  # characters of a compiler log or traceback carried back to the model


def _tail(text: str) -> str:
    text = (text or "").strip()
    return text if len(text) <= LOG_LIMIT else "…" + text[-LOG_LIMIT:]


def _position(item: dict) -> str:
    return "(" + ", ".join(str(i) for i in item.get("position") or []) + ")"


def diagnosis_lines(diagnosis: dict) -> list[str]:
    """A failed trial's diagnosis (evaluator/judge/diagnose.py) as feedback: the shape of the
    error first, the hint, the worst elements, where the NaN/inf are."""
    lines = []
    pattern = diagnosis.get("pattern")
    if isinstance(pattern, dict) and pattern.get("sentence"):
        lines.append(f"Error pattern: {pattern['sentence']}")
    if diagnosis.get("hint"):
        lines.append(f"Diagnosis: {diagnosis['hint']}")
    worst = [w for w in diagnosis.get("worst") or [] if isinstance(w, dict)]
    if worst:
        rows = [f"  at {_position(w)}: expected {w.get('expected')}, got {w.get('got')}"
                for w in worst]
        lines.append(
            f"{diagnosis.get('outside_tolerance')} of {diagnosis.get('elements')} elements are "
            "outside the tolerance; the worst:\n" + "\n".join(rows)
        )
    bad = diagnosis.get("nonfinite")
    if isinstance(bad, dict) and not diagnosis.get("hint"):
        first = ", ".join(_position(p) for p in bad.get("first") or [] if isinstance(p, dict))
        lines.append(f"NaN {bad.get('nan')}, +inf {bad.get('posinf')}, -inf "
                     f"{bad.get('neginf')}; first at {first}")
    return lines


def feedback_message(*, evaluation: dict | None, had_code: bool) -> str:
    """What the previous turn's kernel did, for the next turn's prompt.

    `evaluation` holds verdict, error, compile_log, traceback, candidate_ms, reference_ms,
    speedup, flags and a failed trial's diagnosis (any may be missing).
    """
    if not had_code:
        return (
            "Your answer had no Python code block defining ModelNew, so nothing could be "
            "evaluated. Answer with the complete file in one ```python code block."
        )
    if evaluation is None:
        return "Your kernel could not be evaluated. Write it again, complete and self-contained."
    verdict = evaluation.get("verdict") or "unknown"
    lines = [f"Your kernel was evaluated. Verdict: {verdict}."]
    if evaluation.get("error"):
        lines.append(f"Error: {_tail(evaluation['error'])}")
    if isinstance(evaluation.get("diagnosis"), dict):
        lines.extend(diagnosis_lines(evaluation["diagnosis"]))
    if evaluation.get("compile_log"):
        lines.append(f"Compiler output:\n```\n{_tail(evaluation['compile_log'])}\n```")
    if evaluation.get("traceback"):
        lines.append(f"Traceback:\n```\n{_tail(evaluation['traceback'])}\n```")
    if flag_kinds.exploits(evaluation.get("flags")):
        lines.append("Exploit checks that flagged it: "
                     + ", ".join(flag_kinds.exploits(evaluation["flags"])))
    if flag_kinds.notes(evaluation.get("flags")):
        lines.append("Notes (not exploits): " + ", ".join(flag_kinds.notes(evaluation["flags"])))
    candidate, reference = evaluation.get("candidate_ms"), evaluation.get("reference_ms")
    if candidate is not None and reference is not None:
        speedup = evaluation.get("speedup")
        lines.append(
            f"Timing: your kernel {candidate:.4g} ms, the reference {reference:.4g} ms"
            + (f" (speedup {speedup:.3g}x)." if speedup else ".")
        )
    if isinstance(evaluation.get("profile"), dict):
        lines.extend(profile_lines(evaluation["profile"]))
    if verdict == "correct":
        lines.append("It is correct. Make it faster if you can, keeping it correct.")
    else:
        lines.append("Fix it: it must be correct first, then fast.")
    lines.append("Answer with the complete new file in one ```python code block.")
    return "\n\n".join(lines)


PROFILE_KERNELS = 6  # per side, in the feedback


def profile_lines(profile: dict) -> list[str]:
    """The per-kernel device times of the profiled call (evaluation/profiles.py), each side."""
    lines = []
    for key, label in (("candidate", "your kernel"), ("reference", "the reference")):
        side = profile.get(key) or {}
        kernels = side.get("kernels") or []
        if not kernels:
            continue
        rows = [f"- {k.get('name')}{' (yours)' if k.get('own') else ''}: "
                f"{k.get('calls')} call(s), {float(k.get('device_us') or 0):.1f} us"
                + (f", {k['share']:.0%}" if k.get("share") is not None else "")
                for k in kernels[:PROFILE_KERNELS]]
        lines.append(f"Device time of {label}, per kernel "
                     f"({float(side.get('device_total_us') or 0):.1f} us in all):\n"
                     + "\n".join(rows))
    return lines


def render_messages(messages: list[dict]) -> str:
    """A readable record of what was sent, kept with the generation."""
    return "\n\n".join(f"### {m['role']}\n{m['content']}" for m in messages)


# ---- extracting code --------------------------------------------------------------------------

FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)```", re.DOTALL)
THINKING = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
CODE_LANGUAGES = {"", "python", "py", "python3"}


def extract_code(text: str) -> str | None:
    """The answer's code: the last Python block defining ModelNew (models often revise),
    else a bare answer that is itself such a file; None when there is none."""
    text = THINKING.sub("", text or "")
    blocks = [
        body for language, body in FENCE.findall(text) if language.lower() in CODE_LANGUAGES
    ]
    defining = [body for body in blocks if "class ModelNew" in body]
    if defining:
        return defining[-1].strip() + "\n"
    if not blocks and "class ModelNew" in text:
        try:
            compile(text, "<answer>", "exec")
        except SyntaxError:
            return None
        return text.strip() + "\n"
    return None
