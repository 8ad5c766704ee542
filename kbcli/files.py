"""Reading a kernel or problem file the user names."""

from pathlib import Path


def read_kernel(path: Path) -> str:
    """The file's text; ValueError saying why it cannot be sent (the caller names the file)."""
    try:
        return path.read_bytes().decode("utf-8")
    except OSError as error:
        raise ValueError(f"cannot read it: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise ValueError(f"not UTF-8 text (byte {error.start})") from error
