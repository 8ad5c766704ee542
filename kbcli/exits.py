"""What every `kb` command exits with, in one place: the commands return these, `kb --help` and
`kb guide` print what they mean, and tests/test_cli_agents.py holds each to its meaning."""

OK = 0
FAILED = 1
USAGE = 2
PENDING = 3

MEANINGS: dict[int, str] = {
    OK: "done: read or sent as asked; with --wait (and `kb test`, `kb check`), settled correct "
        "and ranked, or a correct test run",
    FAILED: "an error: the site refused the request or could not be reached, or this machine "
            "lacks what the command needs; with --wait, settled otherwise: not correct, "
            "flagged, held, off the board, cancelled",
    USAGE: "a usage error: a missing or wrong option, an unreadable file",
    PENDING: "--timeout ran out before the submission was settled; it goes on "
             "(`kb status ID --wait` follows it again)",
}


def help_text() -> str:
    """The exit statuses, for an epilog: a line each (a command's --help wraps them into one
    paragraph)."""
    return "exit status:\n" + "\n".join(f"  {code}  {text};" for code, text in MEANINGS.items())


class CommandError(Exception):
    """Ends a command: `kb: MESSAGE` on stderr (with --json also {"error": ...} on stdout) and
    the exit status. `code` and `allowed` are as the API's errors give them, so a script reads
    kb's refusals and the site's alike."""

    def __init__(self, message: str, status: int = FAILED, *, code: str = "",
                 allowed: list | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.allowed = allowed or []
