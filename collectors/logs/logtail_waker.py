"""Wake log tails on file events (one shared watchdog observer), and spot network filesystems."""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from watchdog.events import (
    DirDeletedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "9p",
        "afs",
        "lustre",
        "gpfs",
        "beegfs",
        "glusterfs",
        "ceph",
        "ocfs2",
        "gfs2",
        "davfs",
        "sshfs",
        "virtiofs",
        "vboxsf",
    }
)
"""Filesystem types on which inotify misses writes made by other machines; every `fuse.*`
type counts too (sshfs, s3fs, gcsfuse, rclone, juicefs)."""


class _DroppedWatchRace(logging.Filter):
    """Drops watchdog's log line for a benign race, and only that line.

    A watch dropped (a tail stopped) while its emitter thread was reading an event logs an
    error; the event is lost for a directory no tail watches any more. Without a logging setup
    Python would print the line on the user's terminal as if something had failed.
    """

    MESSAGE = "InotifyEmitter.queue_events() called when the thread is inactive"

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != self.MESSAGE


logging.getLogger("watchdog.observers.inotify").addFilter(_DroppedWatchRace())

# Our own reads raise open/close-nowrite events; reacting to them would wake the tail forever.
_IGNORED_EVENTS = frozenset({"opened", "closed_no_write"})


def _unescape_mount_field(value: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), value)


def filesystem_type(path: str, mounts_path: str = "/proc/mounts") -> str | None:
    """The type of the filesystem that holds `path` (or would, once it exists).

    Returns:
        The type from `mounts_path` (`ext4`, `nfs4`, `fuse.sshfs`, ...); `None` when the mount
        table cannot be read (not Linux).
    """
    probe = os.path.abspath(path)
    while not os.path.exists(probe) and os.path.dirname(probe) != probe:
        probe = os.path.dirname(probe)
    probe = os.path.realpath(probe)
    best, best_type = "", None
    try:
        with open(mounts_path, encoding="utf-8", errors="replace") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) < 3:
                    continue
                point = _unescape_mount_field(fields[1])
                inside = probe == point or probe.startswith(point.rstrip("/") + "/")
                if inside and len(point) >= len(best):
                    best, best_type = point, fields[2]
    except OSError:
        return None
    return best_type


def needs_polling(path: str, mounts_path: str = "/proc/mounts") -> bool:
    """Whether `path` lies on a filesystem where inotify cannot be trusted to see writes."""
    fs_type = filesystem_type(path, mounts_path)
    if fs_type is None:
        return False
    return fs_type in NETWORK_FILESYSTEMS or fs_type.startswith("fuse")


@dataclass(eq=False)
class WakeSubscription:
    """One tail's interest in one path; `event` is set whenever the path may have changed."""

    path: str
    event: threading.Event = field(default_factory=threading.Event)
    key: str = ""
    """The path with its directory resolved, as inotify reports it."""
    watched_dir: str | None = None
    on_created: Callable[[], None] | None = None
    """Called on the observer thread, before `event` is set, when a file is created at the path
    or moved onto it (a rotation's new file): it must be quick and must not raise."""
    error: str | None = None
    """Why the path's directory could not be watched at the last `watch()` (inotify refused:
    its watch limit, no read permission on the directory); `None` once it is watched."""


@dataclass(eq=False)
class _DirWatch:
    watch: ObservedWatch
    dir_id: tuple[int, int]
    subscribers: set[WakeSubscription]


class _Handler(FileSystemEventHandler):
    def __init__(self, waker: TailWaker) -> None:
        self._waker = waker

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _IGNORED_EVENTS:
            self._waker._dispatch(event)


class TailWaker:
    """One watchdog observer shared by every log tail of a process.

    Each tail subscribes to its path; the waker watches the directory that holds it
    (non-recursively, one watch per directory however many tails live there) and sets the
    subscription's event on any change to the path. Tails never read in the observer thread: the
    event only cuts short their wait. Create one per application, pass it to every
    `LogTailCollector`, and `close()` it at exit.

    Two locks, always taken in this order: `_calls` serializes every call into watchdog
    (`schedule`, `unschedule`, `stop`) with the bookkeeping that decides it, so two tails never
    place or drop the same directory's watch at once; `_lock` guards the maps and is held only
    for dictionary work, never while calling out. watchdog calls `_dispatch` while holding its
    own lock, and `_dispatch` takes `_lock` only: holding `_lock` while calling `schedule`
    froze the dashboard once (each thread waited for the lock the other held).

    Args:
        every_write: wake tails on every write to their files. False asks the kernel only for
            files created, moved, deleted, and closed after writing (rotation, copytruncate,
            `> log`); tails then find new lines by polling. On a slow core each inotify event
            costs the observer about 0.2 ms, so a log written 100 times a second costs 2 % of
            a core with every write, nothing without.
    """

    def __init__(self, every_write: bool = True) -> None:
        self._event_filter: list[type[FileSystemEvent]] | None = (
            None
            if every_write
            else [
                FileCreatedEvent,
                FileMovedEvent,
                FileDeletedEvent,
                FileClosedEvent,
                DirDeletedEvent,
                DirMovedEvent,
            ]
        )
        self._calls = threading.Lock()
        self._lock = threading.Lock()
        self._observer: BaseObserver | None = None
        self._closed = False
        self._handler = _Handler(self)
        self._by_key: dict[str, set[WakeSubscription]] = {}
        self._dirs: dict[str, _DirWatch] = {}
        self.last_error: str | None = None
        """Why the last watch could not be placed (inotify limits, ...); each tail also gets
        its own reason on its subscription (`WakeSubscription.error`) and says it once."""
        self.failures = 0
        """How many times placing a watch failed (each tail falls back to polling meanwhile)."""

    def subscribe(
        self,
        path: str,
        event: threading.Event | None = None,
        on_created: Callable[[], None] | None = None,
    ) -> WakeSubscription:
        """Register interest in `path` (setting `event`, or a new one, on changes).

        Call `watch()` before every wait to keep the path watched as directories come and go.
        `on_created` is called when a file appears at the path (see `WakeSubscription`).
        """
        return WakeSubscription(
            path=path,
            event=event if event is not None else threading.Event(),
            on_created=on_created,
        )

    def watch(self, sub: WakeSubscription) -> bool:
        """Make sure the directory holding `sub.path` is watched.

        Returns:
            `False` when it cannot be (the directory is missing, inotify refused, or the waker
            is closed); the tail then relies on its periodic stat.
        """
        key = os.path.realpath(sub.path)
        directory = os.path.dirname(key)
        try:
            info = os.stat(directory)
        except OSError:
            self._forget(sub)
            return False
        dir_id = (info.st_dev, info.st_ino)
        with self._lock:  # the common case, before every wait: nothing to change
            if self._watched_locked(sub, key, directory, dir_id):
                return True
        with self._calls:
            placed = self._place(sub, key, directory, dir_id)
        if placed:
            # Changes made while the path was not watched raised no event: look once more now.
            sub.event.set()
        return placed

    def unsubscribe(self, sub: WakeSubscription) -> None:
        """Drop `sub`; the directory watch goes when its last subscriber does."""
        self._forget(sub)

    def close(self) -> None:
        """Stop the observer thread; later `watch()` calls place nothing."""
        with self._calls:
            with self._lock:
                observer, self._observer = self._observer, None
                self._closed = True
                self._dirs.clear()
                self._by_key.clear()
            if observer is not None:
                observer.stop()
                observer.join(timeout=5)

    @property
    def watched_directories(self) -> int:
        """How many directories are watched now."""
        with self._lock:
            return len(self._dirs)

    def _watched_locked(
        self, sub: WakeSubscription, key: str, directory: str, dir_id: tuple[int, int]
    ) -> bool:
        current = self._dirs.get(directory)
        return (
            current is not None
            and current.dir_id == dir_id
            and sub.key == key
            and sub in current.subscribers
        )

    def _place(
        self, sub: WakeSubscription, key: str, directory: str, dir_id: tuple[int, int]
    ) -> bool:
        """Subscribe `sub` to `directory`'s watch, placing it if needed (holding `_calls`)."""
        with self._lock:
            if self._closed:
                return False
            if self._watched_locked(sub, key, directory, dir_id):
                return True  # another thread placed it meanwhile
            dropped = self._forget_locked(sub)
            current = self._dirs.get(directory)
            if current is not None and current.dir_id != dir_id:
                # The directory was removed and made again: the old inotify watch is dead.
                del self._dirs[directory]
                dropped.append(current.watch)
                current = None
        self._unschedule(dropped)
        if current is None:
            try:
                watch = self._observer_started().schedule(
                    self._handler, directory, recursive=False, event_filter=self._event_filter
                )
            except OSError as error:
                reason = f"cannot watch {directory}: {error.strerror or error}"
                with self._lock:
                    self.last_error, sub.error = reason, reason
                    self.failures += 1
                return False
            current = _DirWatch(watch, dir_id, set())
        with self._lock:
            self._dirs[directory] = current
            current.subscribers.add(sub)
            sub.key, sub.watched_dir, sub.error = key, directory, None
            self._by_key.setdefault(key, set()).add(sub)
        return True

    def _observer_started(self) -> BaseObserver:
        """The observer, started on first use (holding `_calls`)."""
        observer = self._observer
        if observer is None:
            observer = Observer()
            observer.daemon = True
            observer.start()
            with self._lock:
                self._observer = observer
        return observer

    def _unschedule(self, watches: list[ObservedWatch]) -> None:
        """Drop watches from the observer (holding `_calls`, never `_lock`)."""
        observer = self._observer
        if observer is None:
            return
        for watch in watches:
            try:
                observer.unschedule(watch)
            except KeyError:
                pass  # watchdog already dropped the emitter of a deleted directory

    def _forget(self, sub: WakeSubscription) -> None:
        with self._lock:
            if sub.watched_dir is None and not sub.key:
                return  # not watched: the tail of a missing directory asks before every wait
        with self._calls:
            with self._lock:
                dropped = self._forget_locked(sub)
            self._unschedule(dropped)

    def _forget_locked(self, sub: WakeSubscription) -> list[ObservedWatch]:
        """Drop `sub` from the maps; the watches nobody needs any more, to unschedule."""
        dropped: list[ObservedWatch] = []
        subs = self._by_key.get(sub.key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._by_key[sub.key]
        directory = sub.watched_dir or ""
        entry = self._dirs.get(directory)
        if entry is not None:
            entry.subscribers.discard(sub)
            if not entry.subscribers:
                del self._dirs[directory]
                dropped.append(entry.watch)
        sub.key, sub.watched_dir = "", None
        return dropped

    def _dispatch(self, event: FileSystemEvent) -> None:
        """Runs on watchdog's thread, inside watchdog's lock: take `_lock` only, call nothing."""
        paths = [os.fsdecode(event.src_path), os.fsdecode(getattr(event, "dest_path", "") or "")]
        with self._lock:
            woken: list[WakeSubscription] = []
            for path in paths:
                woken.extend(self._by_key.get(path, ()))
                entry = self._dirs.get(path)
                if entry is not None:  # the watched directory itself went away
                    woken.extend(entry.subscribers)
        # A file appearing at a path (created, or renamed onto it) is told apart, so a tail can
        # open it at once: by its first read another rotation may have renamed it away.
        kind = event.event_type
        created = paths[0] if kind == "created" else paths[1] if kind == "moved" else ""
        for sub in woken:
            if created and created == sub.key and sub.on_created is not None:
                sub.on_created()
            sub.event.set()
