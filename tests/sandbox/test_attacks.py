"""The attack suite: one real attack kernel per class of docs/security.md's threat model,
submitted like any kernel and evaluated by a real runner (`manage.py runner`, its queue worker,
a judge and the candidate's worker), on the CPU or, with KB_SANDBOX_TEST_DEVICE=cuda, on the
host's GPU.

The attacker submits a Python file; everything in it runs (here in `ModelNew.__init__`) and it
knows the platform's source and layout. Each kernel prints one `KB-ATTACK {...}` line saying
what each attempt got, and returns a wrong output. After each attack (conftest.py's
`Arena.finish`): the attacker's evaluation is not `correct` and ranks nowhere; every attempt
reports that it was blocked; no stored field of its submission or evaluations holds a canary
(the runner's KB_CANARY and SECRET_KEY, the admin password and secret key files in its var/,
a canary user and that user's private kernel in the database); the attacker is no superuser;
nothing tagged by the attack (files, processes) is left; and the next honest kernel on the same
runner is judged correct, with nothing of the attack in its result.

What each test covers:

- platform data: the candidate cannot read var/ (admin password, secret key), the database
  (users, other users' private sources), the environment of the runner and its workers, nor
  change the database (make its owner a superuser).
- its own verdict: the runner takes the first result line on the judge's event pipe; the
  candidate cannot reach that pipe (/proc/<judge>/fd) to write a forged "correct, 5000x".
- another user's verdict: spare judges are started ahead of their job; the candidate cannot
  reach their event pipes, nor leave a process that waits for the next job's judge, so another
  user's honest kernel evaluated next is judged on its own.
- the build cache: another user's compiled kernel (C++ through load_inline; CUDA on a GPU) is
  neither listed, read (its source holds a canary) nor replaced (its .so overwritten with
  garbage dated ahead): that user's next evaluation of the same source is still correct.
- persistence: the candidate cannot drop code into site-packages (a .pth run by every later
  interpreter), the interpreter's prefix, the checkout or the harness package.
- the network: the candidate cannot connect to a listener of the host, neither plainly nor
  after setns() into another process's network namespace.
- the judge's memory: the candidate can neither read /proc/<pid>/mem of the judge or another
  platform process, nor PTRACE_ATTACH them (which would stop them), nor process_vm_readv them.
- exhaustion: 200 processes, 1 GB written into its build folder, its temporary folder and
  /tmp, 4 GB of memory: none of it outlives the evaluation (no process, no large file in the
  build cache or var/), and the runner carries on.

Before the bubblewrap sandbox (candidate code as the runner's user, with the host's /proc,
files and build cache) most of these attacks succeed and these tests fail on the attempt that
got through.
"""

from __future__ import annotations

import contextlib
import secrets
import socket
import threading

import pytest

from evaluator.runner import buildcache

from .conftest import DEVICE, attack_report, compiled_victim_source, dump, host_code_folders

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_a_kernel_cannot_read_or_change_the_platforms_data(arena):
    attack = arena.attack("platform_data")
    arena.finish(attack, ["read_admin_password", "read_secret_key_file", "read_var_files",
                          "read_database", "read_environ", "make_self_superuser"])


def test_a_kernel_cannot_forge_its_own_verdict(arena):
    attack = arena.attack("forge_own_verdict")
    arena.finish(attack, ["forge_own_verdict"])


def test_a_kernel_cannot_forge_another_users_verdict(arena):
    # The attack's evaluation starts the next spare judge (the victim's) beside itself.
    attack = arena.attack("forge_others_verdict", wait_s=8)
    evaluation = arena.assert_rejected(attack)
    arena.assert_blocked(attack_report(evaluation), ["forge_spare_judges"])
    assert not arena.leftover_processes(), "the attack's watcher outlived its evaluation"
    # The victim's honest kernel, next on the same runner, is judged on its own.
    victim = arena.assert_honest_next_is_correct(arena.victim)
    assert "KB-ATTACK" not in dump(*arena.rows_of(victim))
    arena.assert_no_canary(*arena.rows_of(attack))


@pytest.mark.timeout(900)
def test_a_kernel_cannot_read_or_poison_another_users_build(arena):
    canary = f"kbcanary-build-{secrets.token_hex(8)}"
    source, backend = compiled_victim_source(canary)
    first = arena.evaluate(arena.victim, source, backend, timeout=600)
    assert first.verdict == "correct", (
        f"the victim's compiled kernel itself failed: {first.latest_evaluation.error[:500]}")

    attack = arena.attack("poison_build_cache")
    # The victim submits the same source again: it must still be its own, intact build.
    again = arena.evaluate(arena.victim, source, backend, timeout=600)

    evaluation = arena.assert_rejected(attack)
    arena.assert_blocked(attack_report(evaluation), [
        "list_other_builds", "read_other_sources", "replace_other_so", "plant_in_cache_root"])
    arena.assert_no_canary(*arena.rows_of(attack), extra=[canary])
    assert again.verdict == "correct", (
        f"the victim's kernel, evaluated again after the attack, came back {again.verdict}: "
        f"{again.latest_evaluation.error[:300]!r}")
    assert "KB-ATTACK" not in dump(*arena.rows_of(again))
    assert not arena.tagged_files(), f"the attack left files: {arena.tagged_files()}"
    arena.assert_honest_next_is_correct()


def test_a_kernel_cannot_persist_code_in_the_interpreter_or_the_checkout(arena):
    attack = arena.attack("persist")
    # Checked first (and removed by the fixture whatever happens): a .pth left in
    # site-packages would run in every later interpreter.
    left = [p for folder in host_code_folders() if folder.is_dir()
            for p in folder.iterdir() if arena.tag in p.name]
    assert not left, f"files left where later interpreters or the judge load code: {left}"
    arena.finish(attack, ["pth_in_site_packages", "pth_in_prefix", "module_in_checkout",
                          "module_in_harness"])


@pytest.fixture
def listener():
    """A TCP listener of the host on 127.0.0.1, recording every connection it accepts."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.settimeout(0.2)
    accepted: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn, contextlib.suppress(OSError):
                conn.settimeout(2)
                accepted.append(conn.recv(200) or b"(connected, sent nothing)")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield sock.getsockname()[1], accepted
    stop.set()
    thread.join(5)
    sock.close()


def test_a_kernel_cannot_leave_its_network_namespace(arena, listener):
    port, accepted = listener
    attack = arena.attack("network", port=port)
    assert not accepted, f"the host's listener accepted the attack's connections: {accepted}"
    arena.finish(attack, ["plain_connect", "setns_and_connect"])


def test_a_kernel_cannot_read_or_trace_the_judge(arena):
    attack = arena.attack("judge_memory")
    arena.finish(attack, ["read_judge_mem", "read_platform_mem", "ptrace_judge",
                          "ptrace_platform", "process_vm_readv_judge"])


@pytest.mark.timeout(600)
def test_a_kernel_cannot_exhaust_the_host_or_leave_anything_behind(arena):
    attack = arena.attack("exhaust", processes=200, sleep_s=20, write_mb=1024, memory_mb=4096)
    evaluation = arena.assert_rejected(attack)
    report = attack_report(evaluation)
    assert "info_fork" in report, f"the attack did not run: {report}"
    # Nothing of it outlives the evaluation: no process, no large or tagged file, except in its
    # own build-cache entry (its own source's, kept for its own next evaluation of that
    # source), which may keep what its build folder held up to the entry's limit
    # (docs/security.md, "The build cache"). On the CPU its 1 GiB passes the limit and the entry
    # is dropped; on the H200 its write stopped at 88 MiB and the entry kept it.
    left = arena.leftover_processes()
    assert not left, f"{len(left)} processes of the attack outlived its evaluation"
    own_entry = buildcache.entry_for({
        "build_dir": str(arena.build_cache), "candidate_source": attack.source,
        "build_owner": attack.participant, "backend": attack.backend, "device": DEVICE})
    files = [p for p in arena.tagged_files() if own_entry not in p.parents]
    assert not files, f"the attack left files: {[(str(p), p.stat().st_size) for p in files]}"
    if own_entry.is_dir():
        kept, _, over = buildcache.usage(own_entry, max_bytes=buildcache.ENTRY_MB << 20,
                                         max_files=buildcache.ENTRY_FILES)
        assert not over, f"its own build-cache entry kept {kept} bytes, past the entry's limit"
    arena.assert_no_canary(*arena.rows_of(attack))
    arena.assert_honest_next_is_correct()
