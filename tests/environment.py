"""Loaded before Django's settings (`-p tests.environment` in pyproject.toml's pytest options).

The settings default to DEBUG off, production-like; the tests run in the development setup
(local hosts, a fixed development key, plain static files, cookies over http) unless the
environment says otherwise. Processes the tests start inherit it. Tests of the settings
themselves (tests/test_settings_env.py) start processes with an environment of their own.
"""

import os

os.environ.setdefault("DEBUG", "1")
