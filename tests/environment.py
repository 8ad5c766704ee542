"""Loaded before Django's settings (`-p tests.environment` in pyproject.toml's pytest options).

The settings default to DEBUG off, production-like; the tests run in the development setup
(local hosts, a fixed development key, plain static files, cookies over http) unless the
environment says otherwise. Processes the tests start inherit it. Tests of the settings
themselves (tests/test_settings_env.py) start processes with an environment of their own.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("DEBUG", "1")

# Each test run builds into a cache of its own: an entry kept from an earlier run (same owner
# key, same source) would hand that run's build folder to this one's first evaluation.
if "BUILD_CACHE_DIR" not in os.environ:
    os.environ["BUILD_CACHE_DIR"] = tempfile.mkdtemp(prefix="kbsite-test-build-")
    atexit.register(shutil.rmtree, os.environ["BUILD_CACHE_DIR"], ignore_errors=True)
