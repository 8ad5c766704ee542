"""submissions.runs.llm: prompts, calls with retries (litellm's own mock_response), extraction."""

import json
import os

# litellm fetches its price list from the internet unless told otherwise.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm
import pytest

from submissions.runs import llm

MODEL = llm.ModelSettings(litellm_name="openai/gpt-4o-mini")
MESSAGES = [{"role": "user", "content": "write a kernel"}]
ANSWER = "Here it is:\n```python\nimport torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n```\n"


def canned(*answers) -> callable:
    """A mock in llm.complete's shape: one litellm mock_response per try, the last repeating."""
    return lambda try_number: {"mock_response": answers[min(try_number, len(answers)) - 1]}


def rate_limit() -> Exception:
    return litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-4o-mini")


# ---- extraction -------------------------------------------------------------------------------


def test_it_extracts_the_last_python_block_that_defines_modelnew():
    text = (
        "First try:\n```python\nclass ModelNew:\n    first = True\n```\n"
        "A helper:\n```python\ndef helper():\n    pass\n```\n"
        "Better:\n```py\nclass ModelNew:\n    second = True\n```\nDone."
    )
    assert llm.extract_code(text) == "class ModelNew:\n    second = True\n"


def test_it_takes_a_bare_answer_that_is_itself_a_python_file():
    assert llm.extract_code("import torch\nclass ModelNew:\n    pass\n") == (
        "import torch\nclass ModelNew:\n    pass\n"
    )


@pytest.mark.parametrize(
    "text",
    [
        "I cannot help with that.",
        "```python\ndef not_the_model():\n    pass\n```",
        "```cpp\nclass ModelNew {};\n```",
        "class ModelNew is what you want, but I will not write it (",
        "",
    ],
)
def test_it_finds_no_code_where_no_python_block_defines_modelnew(text):
    assert llm.extract_code(text) is None


def test_it_ignores_code_written_while_thinking():
    text = "<think>```python\nclass ModelNew:\n    draft = 1\n```</think>No code this time."
    assert llm.extract_code(text) is None


# ---- prompts ----------------------------------------------------------------------------------


def test_the_one_shot_prompt_shows_a_cuda_example_then_the_problem():
    prompt = llm.build_prompt(
        reference_source="class Model:\n    UNIQUE_MARKER = 1\n", backend="cuda",
        prompt_style="one_shot",
    )
    assert "load_inline" in prompt and "__global__" in prompt
    assert prompt.index("__global__") < prompt.index("UNIQUE_MARKER")
    assert "ModelNew" in prompt and "triton" not in prompt.lower()


def test_the_triton_prompt_shows_a_triton_example():
    prompt = llm.build_prompt(reference_source="class Model: ...", backend="triton",
                              prompt_style="triton")
    assert "@triton.jit" in prompt and "__global__" not in prompt


def test_feedback_carries_the_verdict_the_error_and_the_timings():
    text = llm.feedback_message(
        evaluation={
            "verdict": "incorrect",
            "error": "max difference 0.7 above tolerance",
            "compile_log": "warning: unused variable",
            "candidate_ms": 2.5,
            "reference_ms": 1.25,
            "speedup": 0.5,
        },
        had_code=True,
    )
    assert "incorrect" in text and "max difference 0.7" in text
    assert "unused variable" in text and "2.5 ms" in text and "1.25 ms" in text
    assert "0.5x" in text


def test_feedback_on_an_answer_without_code_says_so():
    assert "no Python code block" in llm.feedback_message(evaluation=None, had_code=False)


def test_feedback_keeps_only_the_tail_of_a_long_log():
    log = "start-of-log " + "x" * 10000 + " end-of-log"
    text = llm.feedback_message(evaluation={"verdict": "compile_error", "compile_log": log},
                                had_code=True)
    assert "end-of-log" in text and "start-of-log" not in text


# ---- calls ------------------------------------------------------------------------------------


def test_a_rate_limit_is_retried_after_a_backoff_and_the_answer_counted():
    slept = []
    answer = llm.complete(
        model=MODEL, messages=MESSAGES, temperature=0.0,
        mock=canned(rate_limit(), rate_limit(), ANSWER), sleep=slept.append,
    )
    assert answer.text == ANSWER
    assert answer.tries == 3
    assert len(slept) == 2 and all(s > 0 for s in slept)
    # litellm's mock reports usage; its local price list gives the cost of those tokens.
    assert answer.prompt_tokens > 0 and answer.completion_tokens > 0
    prompt_cost, completion_cost = litellm.cost_per_token(
        model="gpt-4o-mini",
        prompt_tokens=answer.prompt_tokens, completion_tokens=answer.completion_tokens,
    )
    assert answer.cost_usd == pytest.approx(prompt_cost + completion_cost)
    assert answer.cost_usd > 0


def test_a_bad_request_fails_at_once_without_a_retry():
    slept = []
    error = litellm.BadRequestError("context too long", model="gpt-4o-mini", llm_provider="openai")
    with pytest.raises(llm.LLMFailure) as failure:
        llm.complete(model=MODEL, messages=MESSAGES, temperature=0.0,
                     mock=canned(error, ANSWER), sleep=slept.append)
    assert failure.value.tries == 1 and slept == []
    assert "context too long" in failure.value.message


def test_it_gives_up_after_the_configured_number_of_tries(settings):
    settings.LLM_MAX_ATTEMPTS = 3
    slept = []
    with pytest.raises(llm.LLMFailure) as failure:
        llm.complete(model=MODEL, messages=MESSAGES, temperature=0.0,
                     mock=canned(rate_limit()), sleep=slept.append)
    assert failure.value.tries == 3 and len(slept) == 2
    assert "RateLimitError" in failure.value.message


def test_it_stops_retrying_when_the_deadline_is_near():
    import time

    with pytest.raises(llm.LLMFailure):
        llm.complete(model=MODEL, messages=MESSAGES, temperature=0.0, mock=canned(rate_limit()),
                     deadline=time.monotonic() + 0.5, sleep=lambda s: None)


def test_a_provider_retry_after_is_honoured_and_backoff_is_capped():
    import httpx

    response = httpx.Response(429, headers={"retry-after": "7"},
                              request=httpx.Request("POST", "http://provider.invalid"))
    error = litellm.RateLimitError("slow", llm_provider="openai", model="m", response=response)
    assert llm.retry_delay(error, try_number=1, base=1.0, cap=60.0) == 7.0
    assert llm.retry_delay(rate_limit(), try_number=30, base=1.0, cap=60.0) <= 60.0


def test_server_errors_are_retryable_and_client_errors_are_not():
    assert llm.is_retryable(litellm.APIError(503, "down", llm_provider="openai", model="m"))
    assert llm.is_retryable(
        litellm.ServiceUnavailableError("down", llm_provider="openai", model="m")
    )
    assert not llm.is_retryable(
        litellm.AuthenticationError("bad key", llm_provider="openai", model="m")
    )
    assert not llm.is_retryable(litellm.APIError(400, "bad", llm_provider="openai", model="m"))


def test_a_key_variable_that_is_not_set_fails_with_its_name(monkeypatch):
    monkeypatch.delenv("KBSITE_TEST_MISSING_KEY", raising=False)
    model = llm.ModelSettings(litellm_name="openai/gpt-4o-mini",
                              api_key_env="KBSITE_TEST_MISSING_KEY")
    with pytest.raises(llm.LLMFailure, match="KBSITE_TEST_MISSING_KEY"):
        llm.complete(model=model, messages=MESSAGES, temperature=0.0, mock=canned(ANSWER))


# ---- canned answers from a file ---------------------------------------------------------------


def test_canned_answers_are_off_unless_a_file_is_named(monkeypatch):
    monkeypatch.delenv(llm.MOCK_FILE_ENV, raising=False)
    assert llm.mock_for(model="m", problem="level1/1_A", sample=0, turn=0) is None


def test_canned_answers_pick_the_most_specific_key_and_one_answer_per_try(tmp_path, monkeypatch):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({
        "level1/1_A": "any turn",
        "level1/1_A#turn1": [{"raise": "rate_limit"}, {"answer": "turn one", "delay": 0.01}],
        "*": "anything else",
    }))
    monkeypatch.setenv(llm.MOCK_FILE_ENV, str(path))
    assert llm.mock_for(model="m", problem="level1/1_A", sample=3, turn=0)(1) == {
        "mock_response": "any turn"
    }
    turn_one = llm.mock_for(model="m", problem="level1/1_A", sample=0, turn=1)
    assert isinstance(turn_one(1)["mock_response"], litellm.RateLimitError)
    assert turn_one(2) == turn_one(5) == {"mock_response": "turn one", "mock_delay": 0.01}
    assert llm.mock_for(model="m", problem="level2/9_B", sample=0, turn=0)(1) == {
        "mock_response": "anything else"
    }


def test_a_step_without_a_canned_answer_fails_clearly(tmp_path, monkeypatch):
    path = tmp_path / "answers.json"
    path.write_text(json.dumps({"level1/1_A": "x"}))
    monkeypatch.setenv(llm.MOCK_FILE_ENV, str(path))
    with pytest.raises(llm.LLMFailure, match="no canned answer for level1/2_B"):
        llm.mock_for(model="m", problem="level1/2_B", sample=0, turn=0)


def test_a_broken_canned_answers_file_fails_clearly(tmp_path, monkeypatch):
    path = tmp_path / "answers.json"
    path.write_text("{not json")
    monkeypatch.setenv(llm.MOCK_FILE_ENV, str(path))
    with pytest.raises(llm.LLMFailure, match="Cannot read the canned answers"):
        llm.mock_for(model="m", problem="level1/1_A", sample=0, turn=0)
    path.write_text(json.dumps({"*": {"raise": "meteor"}}))
    pick = llm.mock_for(model="m", problem="level1/1_A", sample=0, turn=0)
    with pytest.raises(llm.LLMFailure, match="Unknown canned error 'meteor'"):
        llm.complete(model=MODEL, messages=MESSAGES, temperature=0.0, mock=pick)


def test_feedback_gives_the_model_the_per_kernel_device_times_of_both_sides():
    from tests.test_profiles import PROFILE

    text = llm.feedback_message(
        evaluation={"verdict": "correct", "candidate_ms": 2.73, "reference_ms": 2.75,
                    "speedup": 1.006, "profile": PROFILE},
        had_code=True,
    )
    assert "Device time of your kernel, per kernel (2743.7 us in all)" in text
    own = "- bias_relu_kernel(float*, float const*, long, long) (yours): 1 call(s), 40.7 us, 1%"
    assert own in text
    assert "Device time of the reference, per kernel (2751.3 us in all)" in text
