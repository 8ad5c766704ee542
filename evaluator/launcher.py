"""The one launcher: every process the evaluator starts, starts here.

    runner --start_trusted--> judge (trusted) --start_sandboxed--> bwrap --> candidate code

Candidate code (the evaluation's worker, the profiling worker, ncu around the candidate, and
the sandbox's own self-test) starts only through `start_sandboxed` and `run_sandboxed`: they
turn the runner's decision (runner/jail.py decides the bwrap binary, the candidate's uid, the
seccomp program, the read-only paths, the slot and the cgroup) into bubblewrap's command line
(`command`) and the environment inside (`sandbox_env`). The evaluator's own processes (the
judge, the judge's echo process, the runner's probes of `unshare`) start through
`start_trusted` and `run_trusted`. tests/test_architecture.py holds that no other module
starts a process or builds bwrap's options, so a reader checks one file to know how candidate
code is confined.

Inside the sandbox nothing of the judge is visible: its own user, pid, mount, network, IPC,
UTS and cgroup namespaces; no capabilities, `no_new_privs`, the seccomp filter; the
interpreter, site-packages, the CUDA libraries and this package read-only; a private
size-limited tmpfs as home, work and /tmp; a fresh /proc; /dev with the GPU's nodes only; and
one writable host folder, the evaluation's build slot (BUILD).

No torch import here: the runner imports this module too.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

from evaluator.backends import CACHE_ENV

JAIL_ENV = "KB_JAIL"  # the judge's copy of the runner's decision (JSON)

# Where things are inside the sandbox.
LIB = "/kb/lib"  # this package's parent folder, on PYTHONPATH, read-only
# This package on the host: bound read-only at LIB/evaluator in every sandbox.
PACKAGE = str(Path(__file__).resolve().parent)
BUILD = "/kb/build"  # the evaluation's build slot, read-write
HOME = "/tmp/home"
SANDBOX_ID = 65534  # the candidate's uid and gid as it sees them ("nobody")
WORK = "/tmp/work"


def gpu_nodes() -> list[str]:
    return sorted(str(p) for p in Path("/dev").glob("nvidia*"))


def _folders_above(paths: list[str]) -> list[str]:
    """Every ancestor of these paths that is neither "/" nor inside another of them."""
    bound = set(paths)
    out: set[str] = set()
    for path in paths:
        parent = os.path.dirname(path)
        while parent not in ("/", ""):
            if not any(parent == b or parent.startswith(b + "/") for b in bound):
                out.add(parent)
            parent = os.path.dirname(parent)
    return sorted(out, key=lambda p: (p.count("/"), p))


def command(jail: dict[str, Any], argv: list[str]) -> tuple[list[str], list[int]]:
    """bwrap's command line around `argv`, and the fds it must inherit (the seccomp program,
    which bwrap reads and closes). The caller passes them with pass_fds, then closes its copy.

    A root runner: bwrap runs as root without a user namespace (so it can bind whatever the
    runner can read, an interpreter under /root included), and inside it `setpriv` takes the
    candidate's unused host uid, clears groups, capabilities and the bounding set and sets
    no_new_privs before the worker's interpreter starts; the seccomp filter is already on.
    Another runner: bwrap makes a user namespace in which the sandbox's uid maps to the
    runner's own (a dedicated account, docs/security.md), with every capability dropped.
    """
    seccomp_fd = os.open(jail["seccomp"], os.O_RDONLY | os.O_CLOEXEC)
    os.set_inheritable(seccomp_fd, True)
    fds = [seccomp_fd]
    uid = jail.get("uid")
    tmpfs = int(jail.get("tmpfs_mb") or 1024) * 1024 * 1024
    cmd = [jail["bwrap"]]
    if uid is None:
        cmd += ["--unshare-user", "--disable-userns", "--uid", str(SANDBOX_ID),
                "--gid", str(SANDBOX_ID), "--cap-drop", "ALL"]
    cmd += [
        "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
        "--unshare-cgroup-try",
        "--hostname", "kb-sandbox",
        "--die-with-parent",
        "--new-session",
    ]
    # The sandbox's own tmpfs first: bwrap mounts in the order given, and a tmpfs mounted on
    # /tmp after the read-only binds would hide those under /tmp (a checkout, and so its
    # .venv, cloned under /tmp).
    cmd += [
        "--perms", "1777", "--size", str(tmpfs), "--tmpfs", "/tmp",
        "--perms", "1777", "--dir", HOME,
        "--perms", "1777", "--dir", WORK,
    ]
    binds = [*jail["readonly"], f"{LIB}/evaluator", BUILD]
    # The folders above a bound path are made first, traversable: bwrap would make them 0700
    # and owned by root, which the candidate's uid could not walk. (/tmp is there already.)
    for folder in _folders_above(binds):
        if folder != "/tmp":
            cmd += ["--perms", "0755", "--dir", folder]
    for path in jail["readonly"]:
        if os.path.islink(path) and path.count("/") == 1:  # /bin -> usr/bin on merged /usr
            cmd += ["--symlink", os.readlink(path), path]
        else:
            cmd += ["--ro-bind", path, path]
    cmd += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--perms", "1777", "--size", str(tmpfs // 4), "--tmpfs", "/dev/shm",
        "--ro-bind", jail["harness"], f"{LIB}/evaluator",
        "--bind", jail["slot"], BUILD,
    ]
    # Its own passwd and group files, naming only the candidate (libraries look the user up,
    # e.g. the profiler through getpass), instead of the host's accounts.
    uid_inside = SANDBOX_ID if uid is None else int(uid)
    for name, text in (
        ("passwd", f"root:x:0:0::/:/bin/false\nkb:x:{uid_inside}:{uid_inside}:kb:{HOME}:/bin/sh\n"),
        ("group", f"root:x:0:\nkb:x:{uid_inside}:\n"),
    ):
        fd = os.memfd_create(f"kb-{name}", os.MFD_CLOEXEC)
        os.write(fd, text.encode())
        os.lseek(fd, 0, os.SEEK_SET)
        os.set_inheritable(fd, True)
        fds.append(fd)
        cmd += ["--perms", "0644", "--ro-bind-data", str(fd), f"/etc/{name}"]
    for node in gpu_nodes() if jail.get("device", "cpu") != "cpu" else []:
        cmd += ["--dev-bind", node, node]
    cmd += ["--chdir", WORK, "--seccomp", str(seccomp_fd), "--"]
    if uid is not None:
        cmd += ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    group = jail.get("cgroup")
    if group:
        # bwrap and everything it starts in the evaluation's cgroup (limit_job): a shell
        # moves itself there ("0" is the writer), then becomes bwrap.
        cmd = ["/bin/sh", "-c", 'echo 0 > "$0" && exec "$@"',
               os.path.join(group, "cgroup.procs"), *cmd]
    return [*cmd, *argv], fds


def sandbox_env(env: dict[str, str]) -> dict[str, str]:
    """The worker's environment inside the sandbox (bwrap passes on the one it is started
    with): the judge's, already scrubbed by the runner, with every path pointing inside."""
    out = {k: v for k, v in env.items() if k not in (JAIL_ENV,)}
    out.update({
        "HOME": HOME,
        "TMPDIR": "/tmp",
        "PYTHONPATH": LIB,
        "TORCH_EXTENSIONS_DIR": f"{BUILD}/ext",
        "TRITON_CACHE_DIR": f"{BUILD}/triton",
        **{var: f"{BUILD}/{folder}" for var, folder in CACHE_ENV.items()},
        "XDG_CACHE_HOME": f"{HOME}/.cache",
        "USER": "kb",
        "LOGNAME": "kb",
    })
    return out


def jail_from_env() -> dict[str, Any] | None:
    """The judge's side: the runner's decision, or None when the judge was started without one
    (then it refuses to start a worker)."""
    raw = os.environ.get(JAIL_ENV)
    if not raw:
        return None
    return json.loads(raw)


def sandboxed(decision: dict[str, Any]) -> bool:
    return decision.get("mode") == "bwrap"


def start_sandboxed(decision: dict[str, Any], argv: list[str], *, env: dict[str, str],
                    cwd: str, pass_fds: tuple[int, ...] = (),
                    new_session: bool = False) -> subprocess.Popen:
    """Candidate code, started inside the sandbox the runner decided, with its output piped.

    Only a decision of mode "off" (KB_SANDBOX=off, which a runner refuses without an explicit
    acknowledgement) runs `argv` as is, in `cwd`: for measuring the sandbox's own cost."""
    fds: list[int] = []
    if sandboxed(decision):
        argv, fds = command(decision, argv)
        env, cwd = sandbox_env(env), "/"
    else:
        env = {k: v for k, v in env.items() if k != JAIL_ENV}
    try:
        return subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                pass_fds=(*pass_fds, *fds), start_new_session=new_session)
    finally:
        for fd in fds:  # bwrap holds its own copies now
            os.close(fd)


def run_sandboxed(decision: dict[str, Any], argv: list[str], *, env: dict[str, str],
                  timeout: float, out_limit: int, err_limit: int) -> dict[str, Any]:
    """Candidate code run to its end inside the sandbox, in a session of its own that is
    killed as a whole at `timeout`: {"rc", "out", "err", "timed_out"}, the output decoded and
    cut to its limits (the start of stdout, the end of stderr)."""
    proc = start_sandboxed(decision, argv, env=env, cwd="/", new_session=True)
    try:
        out, err = proc.communicate(timeout=max(1.0, timeout))
        timed_out = False
    except subprocess.TimeoutExpired:
        with contextlib.suppress(OSError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    return {"rc": -9 if timed_out else proc.returncode, "timed_out": timed_out,
            "out": out.decode(errors="replace")[:out_limit],
            "err": err.decode(errors="replace")[-err_limit:]}


def start_trusted(argv: list[str], **popen: Any) -> subprocess.Popen:
    """One of the evaluator's own processes (the judge, its echo process): never candidate
    code, so it runs outside the sandbox, with whatever isolation the caller's `argv` asks."""
    return subprocess.Popen(argv, **popen)


def run_trusted(argv: list[str], *, timeout: float) -> subprocess.CompletedProcess:
    """A short probe of the host by the runner (which `unshare` variants work here)."""
    return subprocess.run(argv, capture_output=True, timeout=timeout)
