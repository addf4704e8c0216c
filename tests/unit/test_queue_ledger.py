"""The shared reservation ledger with real files, real processes and, as root, two real uids."""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gpuherd.queue.headroom import Reservation, reserved_by_gpu
from gpuherd.queue.ledger import Ledger, LedgerError, default_ledger_dir
from gpuherd.queue.ledger_files import PID_MAX, Sightings, parse_entry
from tests.privileges import other_users_process

GIB = 1 << 30
GPU_A = "GPU-aaaaaaaa-0000-0000-0000-000000000000"
GPU_B = "GPU-bbbbbbbb-0000-0000-0000-000000000000"
OTHER_UID = 12345
UNREADABLE = "JSON nested too deeply or with a number too long to read"
SETPRIV = shutil.which("setpriv")
AS_ROOT = os.geteuid() == 0


def needs_two_uids() -> None:
    if not AS_ROOT:
        pytest.skip("switching to a second uid needs root (CI runs as root)")
    if SETPRIV is None:
        pytest.skip("setpriv (util-linux) is not installed")


def as_uid(uid: int, argv: list[str]) -> list[str]:
    return [str(SETPRIV), "--reuid", str(uid), "--regid", str(uid), "--clear-groups", *argv]


@pytest.fixture
def shared() -> Iterator[Path]:
    """A parent every uid can traverse (pytest's tmp_path is 0700), holding no ledger yet."""
    parent = Path(tempfile.mkdtemp(prefix="gpuherd-ledger-test-"))
    parent.chmod(0o755)
    yield parent
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def warnings() -> list[str]:
    return []


@pytest.fixture
def ledger(shared: Path, warnings: list[str]) -> Ledger:
    return Ledger(shared / "ledger", on_warning=warnings.append)


@pytest.fixture
def sleeper() -> Iterator[psutil.Process]:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield psutil.Process(proc.pid)
    proc.kill()
    proc.wait()


@pytest.fixture
def her_sleeper() -> Iterator[psutil.Process]:
    with other_users_process() as process:
        yield process


def me() -> tuple[int, float]:
    return os.getpid(), psutil.Process().create_time()


FAR = time.time() + 3600


def entry_files(ledger: Ledger) -> list[str]:
    return sorted(p.name for p in ledger.directory.iterdir() if p.name != "ledger.lock")


# --- the directory and the lock ---------------------------------------------------------------


def test_default_dir_is_tmp_unless_the_environment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUHERD_LEDGER_DIR", raising=False)
    assert default_ledger_dir() == Path("/tmp/gpuherd-ledger")
    monkeypatch.setenv("GPUHERD_LEDGER_DIR", "/srv/ledger")
    assert default_ledger_dir() == Path("/srv/ledger")


def test_a_new_ledger_dir_is_sticky_and_world_writable_with_a_0644_lock(ledger: Ledger) -> None:
    info = ledger.directory.lstat()
    assert stat.S_ISDIR(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o1777
    lock = (ledger.directory / "ledger.lock").lstat()
    assert stat.S_ISREG(lock.st_mode) and stat.S_IMODE(lock.st_mode) == 0o644
    assert entry_files(ledger) == []


def test_entries_are_0644_json_files_of_their_owner_and_no_temp_is_left(ledger: Ledger) -> None:
    pid, start = me()
    with ledger.locked() as view:
        view.reserve(GPU_A, 20 * GIB, "alice/1", pid, start, FAR)
    [name] = entry_files(ledger)
    assert name.startswith(f"res-{os.geteuid()}-") and name.endswith(".json")
    info = (ledger.directory / name).lstat()
    assert stat.S_IMODE(info.st_mode) == 0o644 and info.st_uid == os.geteuid()
    assert json.loads((ledger.directory / name).read_text()) == {
        "gpu_uuid": GPU_A,
        "bytes": 20 * GIB,
        "uid": os.geteuid(),
        "pid": pid,
        "pid_start_time": start,
        "expires_at": FAR,
        "job": "alice/1",
    }


# --- what counts ------------------------------------------------------------------------------


def test_exact_reserved_totals_per_gpu_on_two_gpus(ledger: Ledger) -> None:
    pid, start = me()
    with ledger.locked() as view:
        view.reserve(GPU_A, 20 * GIB, "j1", pid, start, FAR)
        view.reserve(GPU_A, 3 * GIB + 7, "j2", pid, start, FAR)
        view.reserve(GPU_B, 5 * GIB, "j2", pid, start, FAR)
    with ledger.locked() as view:
        live = view.live()
    assert reserved_by_gpu(live) == {GPU_A: 23 * GIB + 7, GPU_B: 5 * GIB}
    assert sorted(live, key=lambda r: (r.gpu_uuid, r.bytes)) == [
        Reservation(GPU_A, 3 * GIB + 7, "j2"),
        Reservation(GPU_A, 20 * GIB, "j1"),
        Reservation(GPU_B, 5 * GIB, "j2"),
    ]


def test_a_dead_process_entry_is_ignored_and_deleted_by_its_owner(
    ledger: Ledger, sleeper: psutil.Process
) -> None:
    pid, start = me()
    with ledger.locked() as view:
        view.reserve(GPU_A, 10 * GIB, "mine", pid, start, FAR)
        view.reserve(GPU_A, 7 * GIB, "theirs", sleeper.pid, sleeper.create_time(), FAR)
        assert reserved_by_gpu(view.live()) == {GPU_A: 17 * GIB}
    sleeper.kill()
    sleeper.wait(10)
    with ledger.locked() as view:
        assert view.live() == [Reservation(GPU_A, 10 * GIB, "mine")]
    assert len(entry_files(ledger)) == 1


def test_a_zombie_counts_as_dead(ledger: Ledger) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    start = psutil.Process(proc.pid).create_time()
    with ledger.locked() as view:
        view.reserve(GPU_A, GIB, "z", proc.pid, start, FAR)
    deadline = time.monotonic() + 30
    while psutil.Process(proc.pid).status() != psutil.STATUS_ZOMBIE:
        assert time.monotonic() < deadline, "the child did not exit"
        time.sleep(0.01)
    with ledger.locked() as view:
        assert view.live() == []
    proc.wait()


def test_a_reused_pid_with_another_start_time_is_ignored(ledger: Ledger) -> None:
    pid, start = me()
    with ledger.locked() as view:
        view.reserve(GPU_A, 1 * GIB, "same", pid, start + 0.009, FAR)
        view.reserve(GPU_A, 2 * GIB, "reused", pid, start + 0.02, FAR)
        view.reserve(GPU_A, 4 * GIB, "older", pid, start - 3600, FAR)
        assert [r.job for r in view.live()] == ["same"]


def test_expiry_boundary(ledger: Ledger) -> None:
    pid, start = me()
    expires = time.time() + 100
    with ledger.locked() as view:
        view.reserve(GPU_A, GIB, "j", pid, start, expires)
        assert view.live(now=expires - 0.001) == [Reservation(GPU_A, GIB, "j")]
        assert len(entry_files(ledger)) == 1
        assert view.live(now=expires) == []
        assert entry_files(ledger) == []  # own expired entry deleted


def test_release_drops_only_that_jobs_entries(ledger: Ledger) -> None:
    pid, start = me()
    with ledger.locked() as view:
        view.reserve(GPU_A, GIB, "a", pid, start, FAR)
        view.reserve(GPU_B, GIB, "a", pid, start, FAR)
        view.reserve(GPU_A, 2 * GIB, "b", pid, start, FAR)
        assert view.release("a") == 2
        assert view.release("a") == 0
        assert view.live() == [Reservation(GPU_A, 2 * GIB, "b")]


def test_reserve_refuses_bad_values(ledger: Ledger) -> None:
    pid, start = me()
    with ledger.locked() as view:
        for args, words in (
            ((GPU_A, -1, "j"), "bytes and pid must be positive"),
            ((GPU_A, True, "j"), "bytes is not an int"),
            ((GPU_A, GIB, ""), "job is empty or longer than 256"),
            ((GPU_A, GIB, "x" * 257), "job is empty or longer than 256"),
        ):
            with pytest.raises(ValueError, match=words):
                view.reserve(*args, pid, start, FAR)
    assert entry_files(ledger) == []


def test_a_view_cannot_be_used_after_the_lock_is_released(ledger: Ledger) -> None:
    with ledger.locked() as view:
        pass
    with pytest.raises(RuntimeError, match="after its lock was released"):
        view.live()


def test_own_leftover_temp_files_are_cleaned(ledger: Ledger) -> None:
    (ledger.directory / f".tmp-{os.geteuid()}-deadbeef").write_text("{")
    with ledger.locked() as view:
        assert view.live() == []
    assert entry_files(ledger) == []


# --- entries that are not regular files: skipped with a warning -------------------------------


def _good(ledger: Ledger) -> dict[str, object]:
    pid, start = me()
    with ledger.locked() as view:
        view.reserve(GPU_A, 3 * GIB, "good", pid, start, FAR)
    return json.loads((ledger.directory / entry_files(ledger)[0]).read_text())


def _deep_why() -> str:
    """What 4,000 open brackets are to this Python: 3.11's parser hits its recursion limit
    first (a RecursionError, which once killed every runner); 3.12's reaches the text's end."""
    try:
        json.loads("[" * 4000)
    except RecursionError:
        return UNREADABLE
    except ValueError:
        return "not JSON"
    raise AssertionError("4,000 open brackets parsed as JSON")


DEEP_WHY = _deep_why()

BAD_FILES = {
    "README": ("text", "hello", "not a ledger entry"),
    "res-0-link.json": ("link", None, "a symbolic link"),
    "res-0-fifo.json": ("fifo", None, "not a regular file"),
    "res-0-dir.json": ("dir", None, "not a regular file"),
    "res-0-junk.json": ("text", "not json", "not JSON"),
    "res-0-keys.json": (
        "text",
        json.dumps({"bytes": 1}),
        "not an entry (it needs exactly the "
        "keys bytes, expires_at, gpu_uuid, job, pid, pid_start_time, uid)",
    ),
    "res-0-big.json": ("text", " " * 5000, "larger than 4096 bytes"),
    "res-0-forged.json": (
        "forged",
        None,
        f"it says uid {OTHER_UID} but belongs to uid {os.geteuid()}",
    ),
    # Each of these raised out of `live()` once, stopping every user's runner.
    "res-0-deep.json": ("text", "[" * 4000, DEEP_WHY),
    "res-0-pid.json": (
        "override",
        {"pid": 2**40},
        f"pid above {PID_MAX} or uid outside 0..{2**32 - 2}",
    ),
    "res-0-start.json": (
        "override",
        {"pid_start_time": 10**400},
        "pid_start_time is not a finite number",
    ),
    # NaN is never more than 0.01 s away from a start time: it would match any process.
    "res-0-nan.json": (
        "override",
        {"pid_start_time": float("nan")},
        "pid_start_time is not a finite number",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_each_bad_file_is_skipped_and_named_once_with_why(
    ledger: Ledger, warnings: list[str], shared: Path, name: str
) -> None:
    good = _good(ledger)
    d = ledger.directory
    kind, text, why = BAD_FILES[name]
    if kind == "text":
        (d / name).write_text(str(text))
    elif kind == "link":
        (shared / "elsewhere.json").write_text(json.dumps(good | {"bytes": 50 * GIB}))
        (d / name).symlink_to(shared / "elsewhere.json")
    elif kind == "fifo":
        os.mkfifo(d / name)
    elif kind == "dir":
        (d / name).mkdir()
    elif kind == "override":
        (d / name).write_text(json.dumps(good | dict(text)))  # type: ignore[call-overload]
    else:
        (d / name).write_text(json.dumps(good | {"uid": OTHER_UID}))
    for _ in range(3):
        with ledger.locked() as view:
            assert view.live() == [Reservation(GPU_A, 3 * GIB, "good")]
    assert warnings == [f"ledger: {d}/{name}: {why}; not counted"]


def test_many_bad_files_are_one_line_and_a_later_one_another(
    ledger: Ledger, warnings: list[str]
) -> None:
    """As the attack ran it: 20,000 junk files, read at every decision, say one line."""
    _good(ledger)
    d = ledger.directory
    for i in range(20_000):
        (d / (f"res-0-{i:05d}.json" if i % 2 else f"junk-{i:05d}")).write_text("x")
    for _ in range(3):
        with ledger.locked() as view:
            assert view.live() == [Reservation(GPU_A, 3 * GIB, "good")]
    assert warnings == [
        f"ledger: 20000 files in {d} are not counted (the first, junk-00000: "
        "not a ledger entry); each is named once"
    ]
    (d / "res-0-late.json").write_text("{")
    with ledger.locked() as view:
        view.live()
    assert warnings[1:] == [f"ledger: {d}/res-0-late.json: not JSON; not counted"]


# --- refusals ---------------------------------------------------------------------------------


def test_a_symlinked_ledger_dir_is_refused(shared: Path) -> None:
    (shared / "real").mkdir(mode=0o700)
    (shared / "real").chmod(0o1777)
    (shared / "ledger").symlink_to(shared / "real")
    with pytest.raises(LedgerError, match=r"ledger is a symbolic link; refusing to follow it"):
        Ledger(shared / "ledger")


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757])
def test_writable_by_others_without_the_sticky_bit_is_refused(shared: Path, mode: int) -> None:
    (shared / "ledger").mkdir()
    (shared / "ledger").chmod(mode)
    with pytest.raises(LedgerError) as caught:
        Ledger(shared / "ledger")
    assert caught.value.msg == (
        f"the ledger directory {shared}/ledger is writable by other users but has no sticky "
        f"bit (mode {mode:04o}), so anyone could delete reservations; run: chmod 1777 "
        f"{shared}/ledger"
    )


def test_a_file_in_place_of_the_dir_is_refused(shared: Path) -> None:
    (shared / "ledger").write_text("")
    with pytest.raises(LedgerError, match="ledger is not a directory"):
        Ledger(shared / "ledger")


def test_a_private_dir_of_ones_own_is_accepted(shared: Path) -> None:
    (shared / "ledger").mkdir(mode=0o700)
    Ledger(shared / "ledger")


@pytest.mark.parametrize("kind", ["symlink", "fifo", "dir", "foreign"])
def test_a_lock_that_is_not_the_owners_regular_file_is_named_once_and_not_used(
    shared: Path, kind: str
) -> None:
    d = shared / "ledger"
    d.mkdir()
    d.chmod(0o1777)
    lock = d / "ledger.lock"
    if kind == "symlink":
        (shared / "target").write_text("")
        lock.symlink_to(shared / "target")
    elif kind == "fifo":
        os.mkfifo(lock)
    elif kind == "dir":
        lock.mkdir()
    else:
        lock.write_text("")
        os.chown(lock, OTHER_UID, OTHER_UID) if AS_ROOT else pytest.skip("needs root")
    what = {
        "symlink": "is a symbolic link, not the ledger's lock",
        "fifo": "is not a regular file (a named pipe)",
        "dir": "is not a regular file (a directory)",
        "foreign": f"belongs to uid {OTHER_UID}, not to the ledger directory's owner "
        f"(root (uid 0)), so it is not trusted",
    }[kind]
    said: list[str] = []
    ledger = Ledger(d, on_warning=said.append)
    pid, start = me()
    for _ in range(3):
        with ledger.locked() as view:
            view.reserve(GPU_A, GIB, f"j{_}", pid, start, FAR)
            assert len(view.live()) == _ + 1
    assert said == [
        f"ledger: {lock} {what}; it is not used (the ledger directory's own lock "
        "still orders runners)"
    ]


HOLD = textwrap.dedent("""
    import fcntl, os, sys, time
    fd = os.open(sys.argv[1], os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("held", flush=True)
    time.sleep(60)
""")


def test_a_lock_held_too_long_is_named_with_its_holder_and_the_ledger_goes_on(
    ledger: Ledger,
) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ledger.directory / "ledger.lock")],
        stdout=subprocess.PIPE,
        text=True,
    )
    said: list[str] = []
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        slow = Ledger(ledger.directory, lock_timeout_s=0.2, on_warning=said.append)
        for _ in range(3):
            with slow.locked() as view:
                assert view.live() == []
    finally:
        holder.kill()
        holder.wait()
    lock = ledger.directory / "ledger.lock"
    assert said == [
        f"ledger: {lock} has been held for over 0.2 s by pid {holder.pid} (user "
        "root (uid 0)); it is not used (the ledger directory's own lock still "
        "orders runners)"
    ]
    with slow.locked() as view:  # released with its holder
        assert view.live() == []
    assert said[1:] == [f"ledger: {lock} is usable again"]


def test_a_held_directory_is_named_with_its_holder_and_the_ledger_goes_on(ledger: Ledger) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(ledger.directory)], stdout=subprocess.PIPE, text=True
    )
    said: list[str] = []
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        slow = Ledger(ledger.directory, lock_timeout_s=0.2, on_warning=said.append)
        pid, start = me()
        for n in range(3):
            with slow.locked() as view:
                view.reserve(GPU_A, GIB, f"j{n}", pid, start, FAR)
    finally:
        holder.kill()
        holder.wait()
    assert said == [
        f"ledger: {ledger.directory} (the ledger directory) has been held for over "
        f"0.2 s by pid {holder.pid} (user root (uid 0)); going on without it: "
        "reservations are still read and written, but two runners deciding at the "
        "same moment could share headroom"
    ]
    with slow.locked() as view:
        assert len(view.live()) == 3
    assert said[1:] == [f"ledger: {ledger.directory} can be locked again"]


PROBE = textwrap.dedent("""
    import sys
    from gpuherd.queue.ledger import Ledger, LedgerError
    try:
        Ledger(sys.argv[1])
    except LedgerError as error:
        print(error)
        sys.exit(2)
    print("accepted")
""")


def test_a_root_dir_that_this_user_cannot_write_is_refused(shared: Path) -> None:
    needs_two_uids()
    d = shared / "ledger"
    d.mkdir(mode=0o755)
    out = subprocess.run(
        as_uid(OTHER_UID + 1, [sys.executable, "-c", PROBE, str(d)]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (
        2,
        (
            f"the ledger directory {d} belongs to root (uid 0) with mode 0755, so this user "
            f"cannot add reservations; it must be mode 1777 (its owner or root can run: "
            f"chmod 1777 {d})\n"
        ),
    ), out.stderr
    d.chmod(0o1777)  # the same directory shared like /tmp is fine
    out = subprocess.run(
        as_uid(OTHER_UID + 1, [sys.executable, "-c", PROBE, str(d)]),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (0, "accepted\n"), out.stderr


def test_another_users_entries_count_but_only_their_owner_deletes_them(
    ledger: Ledger, her_sleeper: psutil.Process
) -> None:
    sleeper = her_sleeper
    write = textwrap.dedent("""
        import sys
        from gpuherd.queue.ledger import Ledger
        pid, start, expires = int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
        with Ledger(sys.argv[1]).locked() as view:
            view.reserve(sys.argv[5], 6 << 30, "bob/1", pid, start, expires)
            print(len(view.live()))
    """)
    out = subprocess.run(
        as_uid(
            OTHER_UID,
            [
                sys.executable,
                "-c",
                write,
                str(ledger.directory),
                str(sleeper.pid),
                repr(sleeper.create_time()),
                repr(FAR),
                GPU_B,
            ],
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (0, "1\n"), out.stderr
    [name] = entry_files(ledger)
    assert (ledger.directory / name).lstat().st_uid == OTHER_UID
    with ledger.locked() as view:
        assert view.live() == [Reservation(GPU_B, 6 * GIB, "bob/1")]
        assert view.release("bob/1") == 0  # not ours
    sleeper.kill()
    sleeper.wait(10)
    with ledger.locked() as view:
        assert view.live() == []
    assert entry_files(ledger) == [name]  # stale, ignored, but left to its owner


# --- the race ---------------------------------------------------------------------------------

WORKER = textwrap.dedent("""
    import sys
    import time
    from gpuherd.queue.ledger import Ledger
    directory, gpu, need, cap, job, pid, start, expires = sys.argv[1:9]
    need, cap = int(need), int(cap)
    ledger = Ledger(directory)
    print("ready", flush=True)
    sys.stdin.readline()  # all workers start together
    with ledger.locked() as view:
        taken = sum(r.bytes for r in view.live() if r.gpu_uuid == gpu)
        # A decision takes time; without the lock every worker would read the same total here
        # and all would reserve. With it the sleep only serializes.
        time.sleep(0.05)
        if taken + need <= cap:
            view.reserve(gpu, need, job, int(pid), float(start), float(expires))
            print("reserved", taken, flush=True)
        else:
            print("full", taken, flush=True)
""")


def race(ledger: Ledger, uids: list[int | None], theirs: psutil.Process | None = None) -> list[str]:
    cap, need = 80 * GIB, 10 * GIB
    workers = []
    for i, uid in enumerate(uids):
        pid, start = me() if uid is None or theirs is None else (theirs.pid, theirs.create_time())
        argv = [
            sys.executable,
            "-c",
            WORKER,
            str(ledger.directory),
            GPU_A,
            str(need),
            str(cap),
            f"job-{i}",
            str(pid),
            repr(start),
            repr(FAR),
        ]
        workers.append(
            subprocess.Popen(
                argv if uid is None else as_uid(uid, argv),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )
    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline() == "ready\n"
        for w in workers:
            assert w.stdin is not None
            w.stdin.write("go\n")
            w.stdin.flush()
        results = [w.communicate(timeout=120)[0].split()[0] for w in workers]
    finally:
        for w in workers:
            if w.poll() is None:
                w.send_signal(signal.SIGKILL)
                w.wait()
    with ledger.locked() as view:
        live = view.live()
    assert sum(r.bytes for r in live) == cap  # never more, and every slot was taken
    assert len(live) == cap // need == results.count("reserved")
    assert results.count("full") == len(uids) - cap // need
    return results


def test_concurrent_reservations_never_exceed_the_cap(ledger: Ledger) -> None:
    race(ledger, [None] * 14)


def test_concurrent_reservations_of_two_uids_never_exceed_the_cap(
    ledger: Ledger, her_sleeper: psutil.Process
) -> None:
    race(ledger, [None, OTHER_UID] * 7, her_sleeper)
    owners = {(ledger.directory / n).lstat().st_uid for n in entry_files(ledger)}
    assert owners <= {0, OTHER_UID}


def test_with_ledger_lock_squatted_the_directory_lock_still_orders_runners(ledger: Ledger) -> None:
    lock = ledger.directory / "ledger.lock"
    lock.unlink()
    lock.mkdir()  # as another user would: ledger.lock is no longer a lock anyone can take
    race(ledger, [None] * 14)


def test_bytes_up_to_the_gpus_total_count_one_more_does_not(
    ledger: Ledger, warnings: list[str]
) -> None:
    pid, start = me()
    with ledger.locked() as view:
        view.reserve(GPU_A, 80 * GIB, "whole", pid, start, FAR)
        view.reserve(GPU_B, 80 * GIB + 1, "more", pid, start, FAR)
        assert view.live(gpu_totals={GPU_A: 80 * GIB, GPU_B: 80 * GIB}) == [
            Reservation(GPU_A, 80 * GIB, "whole")
        ]
        # A GPU this host does not show is not judged: the decision never looks at it.
        assert len(view.live()) == 2
    assert len(warnings) == 1 and warnings[0].endswith(
        f"it reserves {80 * GIB + 1} bytes on {GPU_B}, more than that GPU's total "
        f"({80 * GIB} bytes); not counted"
    )


def test_an_expiry_past_the_longest_grace_after_writing_does_not_count(ledger: Ledger) -> None:
    pid, start = me()
    now = time.time()
    with ledger.locked() as view:
        view.reserve(GPU_A, GIB, "longest", pid, start, now + 3600)
        view.reserve(GPU_A, 2 * GIB, "longer", pid, start, now + 3600 + 30)
        view.reserve(GPU_A, 4 * GIB, "forever", pid, start, 1e300)
        assert view.live() == [Reservation(GPU_A, GIB, "longest")]


def test_a_file_name_with_terminal_escapes_is_named_with_them_visible(
    shared: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A junk file named `ESC[2J...`: the runner's stderr line must not clear a screen."""
    ledger = Ledger(shared / "ledger")  # the default warning sink: stderr, as the runner uses it
    (ledger.directory / "res-\x1b[2J\x1b[Hgone.json").write_text("x")
    with ledger.locked() as view:
        view.live()
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert "res-\\x1b[2J\\x1b[Hgone.json: not JSON; not counted" in err


def test_a_number_too_long_to_convert_is_a_bad_entry_not_a_crash() -> None:
    """5000 digits pass Python's 4300-digit limit (a ValueError that is not a JSONDecodeError);
    a ledger file that long is already refused by size, so this is read directly."""
    assert parse_entry(b'{"bytes": ' + b"1" * 5000 + b"}") == ({}, UNREADABLE)
    assert parse_entry(b"[" * 4000) == ({}, DEEP_WHY)


def test_one_uids_entries_count_together_up_to_the_gpus_total(
    ledger: Ledger, warnings: list[str]
) -> None:
    """Each entry fits its GPU, but together one uid's may not hold more than the whole GPU."""
    pid, start = me()
    with ledger.locked() as view:
        for n in range(4):
            view.reserve(GPU_A, 20 * GIB, f"a{n}", pid, start, FAR)  # exactly 80 GiB
        for n in range(3):
            view.reserve(GPU_B, 20 * GIB, f"b{n}", pid, start, FAR)
        view.reserve(GPU_B, 20 * GIB + 1, "b3", pid, start, FAR)  # one byte past 80 GiB
        totals = {GPU_A: 80 * GIB, GPU_B: 80 * GIB}
        for _ in range(2):
            counted = reserved_by_gpu(view.live(gpu_totals=totals))
            assert counted[GPU_A] == 80 * GIB
            assert counted[GPU_B] in (60 * GIB, 60 * GIB + 1)  # whichever name sorts last
            assert len(view.live(gpu_totals=totals)) == 7
        assert len(view.live()) == 8  # a GPU this host does not show is not judged
    assert len(warnings) == 1 and warnings[0].endswith(
        f"with it, uid {os.geteuid()}'s entries on {GPU_B} would reserve more than that GPU's "
        f"total ({80 * GIB} bytes); not counted"
    )


def test_an_entry_counts_for_the_longest_grace_after_this_reader_first_saw_it(
    ledger: Ledger, shared: Path
) -> None:
    """Refreshing a file's ctime (`touch`, `chmod`) does not move when a runner first saw it.

    The runner first reads both entries 3000 s before their (refreshed) change time: from
    then, 3605 s allow the first and not the second, although both end within 3605 s of
    their ctime.
    """
    pid, start = me()
    written = time.time()
    seen = written - 3000
    with ledger.locked() as view:
        view.reserve(GPU_A, GIB, "inside", pid, start, seen + 3605 - 1)
        view.reserve(GPU_A, 2 * GIB, "outside", pid, start, seen + 3605 + 1)
        assert view.live(now=seen) == [Reservation(GPU_A, GIB, "inside")]
    for name in entry_files(ledger):
        os.chmod(ledger.directory / name, 0o644)  # ctime is now, again
    with ledger.locked() as view:
        assert view.live() == [Reservation(GPU_A, GIB, "inside")]
    # A runner that starts now has seen neither before: it has only their ctimes to go by.
    with Ledger(ledger.directory).locked() as view:
        assert len(view.live()) == 2


def test_first_sightings_are_bounded_and_forgotten_with_their_files() -> None:
    sightings = Sightings(limit=2)
    assert [sightings.first(name, 1, at) for name, at in (("a", 1.0), ("b", 2.0))] == [1, 2]
    assert sightings.first("a", 1, 9.0) == 1.0
    assert sightings.first("a", 2, 9.0) == 9.0  # another inode: another file, seen now
    assert sightings.first("a", 1, 10.0) == 10.0  # the oldest sighting was forgotten for it
    sightings.forget_gone({"x"})
    assert sightings.first("a", 2, 11.0) == 11.0


def test_a_ledger_dir_swapped_for_a_link_right_after_it_is_made_is_refused_untouched(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between mkdir and setting mode 1777, another user replaces the new directory with a link
    to one of root's; the mode must not land on the link's target."""
    victim = shared / "victim"
    victim.mkdir(mode=0o755)
    victim.chmod(0o755)
    real_mkdir = os.mkdir

    def mkdir_then_swapped(path: str | os.PathLike[str], mode: int = 0o777) -> None:
        real_mkdir(path, mode)
        os.rmdir(path)
        os.symlink(victim, path)

    monkeypatch.setattr(os, "mkdir", mkdir_then_swapped)
    with pytest.raises(LedgerError, match="was replaced right after it was created"):
        Ledger(shared / "ledger")
    assert stat.S_IMODE(victim.stat().st_mode) == 0o755
