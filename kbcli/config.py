"""Where `kb login` keeps the site's URL and the token: a JSON file only its owner can read."""

import json
import os
from dataclasses import dataclass
from pathlib import Path


class ConfigError(Exception):
    pass


@dataclass
class Config:
    url: str
    token: str


def config_path() -> Path:
    if os.environ.get("KB_CONFIG"):
        return Path(os.environ["KB_CONFIG"])
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "kb" / "config.json"


def save(config: Config) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    # Created 0600 from the start, so the token is never readable by others, even briefly.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        json.dump({"url": config.url, "token": config.token}, handle, indent=2)
        handle.write("\n")
    os.chmod(path, 0o600)  # an older file may have had wider permissions
    return path


def load() -> Config:
    """The saved login, with KB_URL / KB_TOKEN from the environment taking precedence."""
    stored: dict = {}
    path = config_path()
    if path.exists():
        try:
            stored = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ConfigError(f"cannot read {path}: {error}") from None
    url = os.environ.get("KB_URL") or stored.get("url") or ""
    token = os.environ.get("KB_TOKEN") or stored.get("token") or ""
    if not url or not token:
        raise ConfigError("not logged in: run `kb login --url URL` first (or set KB_URL, KB_TOKEN)")
    return Config(url=url.rstrip("/"), token=token)
