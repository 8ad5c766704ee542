"""Why a submission is refused: one exception that every way in (the form, the API, `kb`, a
model run, a competition entry) turns into its own answer, by `code`."""


class SubmissionError(Exception):
    """A submission that cannot be accepted; `code` says why, for HTTP status mapping."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        allowed: list[str] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = code  # too_large, not_utf8, unknown_problem, quota_queued, ...
        self.allowed = allowed
        self.retry_after = retry_after  # seconds, for the quota errors
        # quota_gpu_seconds: the budget, what is used and reserved, when enough frees.
        self.figures: dict | None = None


class BatchError(Exception):
    """Some items of a batch are invalid; nothing of the batch was stored."""

    def __init__(self, errors: list[tuple[int, SubmissionError]]) -> None:
        super().__init__(f"{len(errors)} of the submissions are invalid; none was stored.")
        self.errors = errors
