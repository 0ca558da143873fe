"""The crash-test driver: start a writer child, SIGKILL it, recover, verify
against the oracle, check, repeat.

One cycle:

1. Start the child (:mod:`.child`) in its own process group with this
   cycle's seed; it opens the database (recovering from the last crash) and
   writes from several threads, logging every operation.
2. Kill it with SIGKILL at a moment chosen from the run's seed: during its
   open (recovery), at a random delay after it is ready (log-uniform or
   uniform, up to ``max_delay``), or just after it reports a maintenance
   call (flush, compact_range, checkpoint). Wait until the child and every
   process of its group (the LSM's compaction worker) are gone.
3. Note what the crashed directory shows in progress, and run the engine's
   checker on it as the crash left it.
4. Reopen the database (recovery), read every key of the key space (a full
   scan and a get per key), and check it against the oracle: every
   acknowledged write present, each in-flight operation wholly present or
   wholly absent, nothing else. Run the engine's checks on the open
   database, close it, and check the directory at rest.
5. Record how each in-flight operation went and save the resolved expected
   state (the next cycle continues from it).

Any difference stops the run: :class:`~lsmkv.crashtest.figures.Failure`
describes it, and the database, the oracle and the child's stderr stay in the
work directory. The driver never prints; ``progress`` callbacks get the
figures after every cycle. Kill moments and the child's operations follow
from ``seed``; thread interleaving and the exact kill instant do not.
"""

from __future__ import annotations

import json
import math
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

from .child import ChildConfig, log_path
from .engines import engine as engine_adapter
from .figures import Failure, Figures
from .keyspace import KeySpace
from .oracle import ExpectedState, OracleError, read_op_log, verify

#: How kills are aimed, with their shares of the cycles.
KILL_MODES = (("during open", 0.1), ("during maintenance", 0.2), ("at a random moment", 0.7))
#: Longest wait for the child to open (a loaded machine is slow to import).
START_TIMEOUT = 120.0
#: Longest wait for the child's process group to disappear after the kill
#: (then the driver kills what is left).
GROUP_TIMEOUT = 10.0


@dataclass
class CrashTestConfig:
    """One engine's crash test. Stops after ``cycles`` cycles or ``duration``
    seconds, whichever comes first (at least one of them must be given)."""

    engine: str
    workdir: str
    cycles: int | None = None
    duration: float | None = None
    seed: int = 0
    threads: int = 4
    keys: int = 2000
    #: Engine options on top of the engine's crash-test defaults.
    options: dict = field(default_factory=dict)
    #: Longest delay between the child being ready and the kill, in seconds.
    max_delay: float = 1.0
    #: Keep every cycle's operation logs (normally removed once verified).
    keep_logs: bool = False
    #: Deliberately broken child (tests of the check itself; see child.SABOTAGE).
    sabotage: str | None = None
    #: Threads (the last ones) that write with sync=True nearly always, so
    #: that sync writers meet in group commit (None: half the threads).
    sync_threads: int | None = None

    @property
    def sync_writer_threads(self) -> int:
        return self.threads // 2 if self.sync_threads is None else self.sync_threads

    def validate(self) -> None:
        engine_adapter(self.engine)
        if self.cycles is None and self.duration is None:
            raise ValueError("give a number of cycles, a duration, or both")
        if self.cycles is not None and self.cycles < 1:
            raise ValueError(f"cycles must be at least 1, not {self.cycles}")
        if self.duration is not None and self.duration <= 0:
            raise ValueError(f"duration must be positive, not {self.duration}")
        if self.max_delay <= 0.002:
            raise ValueError(f"max_delay must be more than 0.002 seconds, not {self.max_delay}")
        if not 0 <= self.sync_writer_threads <= self.threads:
            raise ValueError(f"sync_threads must be from 0 to threads ({self.threads}), not {self.sync_threads}")
        KeySpace(self.keys, self.threads)


class _ChildProcess:
    """A running child: its lines on stdout arrive in a queue."""

    def __init__(self, config: ChildConfig, stderr_path: str) -> None:
        self._stderr_path = stderr_path
        with open(stderr_path, "wb") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "lsmkv.crashtest.child", config.to_json()],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                                         start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            self.lines.put(raw.decode(errors="replace").strip())
        self.lines.put(None)

    def wait_for(self, prefix: str, timeout: float) -> bool:
        """Wait for a line starting with ``prefix``; False on timeout.
        Raises ChildExited if the child ends first."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                return False
            if line is None:
                raise ChildExited(self.proc.wait(), self.stderr())
            self.seen.append(line)
            if line.startswith(prefix):
                return True

    def sleep(self, seconds: float) -> None:
        """Sleep, but notice a child that exits meanwhile."""
        if _exits_within(self.proc, seconds):
            raise ChildExited(self.proc.returncode, self.stderr())

    def kill(self, on_reaped: Callable[[], None] | None = None) -> int:
        """SIGKILL the child, call ``on_reaped`` once it is dead, and wait
        until its whole process group is gone (its compaction worker too).
        Returns how many processes of the group the driver had to kill
        because they outlived the child by more than GROUP_TIMEOUT."""
        pgid = self.proc.pid
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if on_reaped is not None:
            on_reaped()
        if self.proc.stdin:
            self.proc.stdin.close()
        stragglers = 0
        if not _wait_group_gone(pgid, GROUP_TIMEOUT):
            stragglers = len(_group_members(pgid))
            try:
                os.killpg(pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            if not _wait_group_gone(pgid, GROUP_TIMEOUT):
                raise RuntimeError(f"processes {_group_members(pgid)} of the killed child's group do not die")
        # Every writer of the pipe is gone: the reader meets its end; keep the lines it read.
        self._reader.join(GROUP_TIMEOUT)
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                break
            if line is not None:
                self.seen.append(line)
        self.proc.stdout.close()
        return stragglers

    def stderr(self) -> str:
        try:
            with open(self._stderr_path, errors="replace") as f:
                return f.read()
        except OSError:
            return ""


class ChildExited(Exception):
    def __init__(self, code: int, stderr: str) -> None:
        super().__init__(f"the child exited by itself (code {code}) before the kill")
        self.code = code
        self.stderr = stderr


def _exits_within(proc: subprocess.Popen, seconds: float) -> bool:
    try:
        proc.wait(timeout=seconds)
        return True
    except subprocess.TimeoutExpired:
        return False


def _group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    try:
        names = os.listdir("/proc")
    except OSError:  # no procfs: ask the kernel whether anything is left
        try:
            os.killpg(pgid, 0)
            return [pgid]
        except ProcessLookupError:
            return []
    members = []
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            members.append(int(name))
    return members


def _wait_group_gone(pgid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _group_members(pgid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


class CrashTest:
    """Runs one engine's crash test in ``config.workdir`` (created if missing,
    which must otherwise be empty)."""

    def __init__(self, config: CrashTestConfig) -> None:
        config.validate()
        self.config = config
        self.engine = engine_adapter(config.engine)
        self.space = KeySpace(config.keys, config.threads)
        self.options = {**self.engine.default_options, **config.options}
        self.db_path = os.path.join(config.workdir, "db")
        self.oracle_dir = os.path.join(config.workdir, "oracle")
        self.state_path = os.path.join(self.oracle_dir, "state.json")
        self.figures = Figures(config.engine, config.seed)
        self._rng = random.Random(f"{config.seed}:{config.engine}")
        self._open_seconds = 0.05

    def run(self, progress: Callable[[Figures], None] | None = None) -> Figures:
        config = self.config
        if os.path.exists(config.workdir) and os.listdir(config.workdir):
            raise ValueError(f"work directory {config.workdir} is not empty")
        os.makedirs(self.oracle_dir)
        # Create the database here: bad engine options fail now, with the engine's own error.
        self.engine.open(self.db_path, self.options).close()
        state = ExpectedState()
        state.save(self.state_path)
        started = time.monotonic()
        cycle = 0
        while True:
            if config.cycles is not None and cycle >= config.cycles:
                break
            if config.duration is not None and time.monotonic() - started >= config.duration:
                break
            cycle += 1
            state = self._cycle(cycle, state)
            self.figures.elapsed = time.monotonic() - started
            if progress is not None:
                progress(self.figures)
            if state is None:
                break
        return self.figures

    # ---- one cycle -----------------------------------------------------------------------------

    def _choose_kill(self) -> tuple[str, float]:
        rng = self._rng
        r = rng.random()
        for mode, share in KILL_MODES:
            if r < share:
                break
            r -= share
        max_delay = self.config.max_delay
        if mode == "during open":
            return mode, rng.uniform(0, 1.5)  # a share of the measured open time
        if mode == "during maintenance":
            return mode, rng.uniform(0, 0.03)  # after the phase is reported
        if rng.random() < 0.5:
            return mode, math.exp(rng.uniform(math.log(0.002), math.log(max_delay)))
        return mode, rng.uniform(0, max_delay)

    def _cycle(self, cycle: int, state: ExpectedState) -> ExpectedState | None:
        config, figures = self.config, self.figures
        log_dir = os.path.join(self.oracle_dir, f"cycle-{cycle:06d}")
        os.makedirs(log_dir)
        mode, delay = self._choose_kill()
        child_seed = self._rng.getrandbits(32)
        child_config = ChildConfig(engine=config.engine, db=self.db_path, log_dir=log_dir, cycle=cycle,
                                   seed=child_seed, threads=config.threads, keys=config.keys,
                                   options=self.options, sabotage=config.sabotage,
                                   sync_threads=config.sync_writer_threads, state=self.state_path)
        stderr_path = os.path.join(log_dir, "child.stderr")
        child = _ChildProcess(child_config, stderr_path)
        try:
            self._aim_and_wait(child, mode, delay)
        except ChildExited as exc:
            child.kill()
            return self._fail(cycle, str(exc), child_stderr=exc.stderr)
        except BaseException:
            child.kill()
            raise
        at_death: set[str] = set()
        stragglers = child.kill(lambda: at_death.update(os.listdir(self.db_path)))
        if child.proc.returncode != -signal.SIGKILL:  # it ended by itself just before the kill
            return self._fail(cycle, f"the child exited by itself (code {child.proc.returncode}) before the kill",
                              child_stderr=child.stderr())
        figures.kills[mode] += 1
        figures.stragglers += stragglers
        ready = "ready" in child.seen
        figures.killed_during_open += not ready
        late = sorted(set(os.listdir(self.db_path)) - at_death)
        if late:
            return self._fail(cycle, "files appeared in the database directory after the child died (a process "
                              "outlived its database)", problems=late, child_stderr=child.stderr())

        evidence = self.engine.crash_evidence(self.db_path)
        histories = [read_op_log(log_path(log_dir, t), t) for t in range(config.threads)]
        step = "checking the crashed directory"
        try:
            problems = self.engine.check(self.db_path)
            if problems:
                return self._fail(cycle, "the engine's check finds the crashed directory damaged",
                                  problems=problems, child_stderr=child.stderr())
            step = "recovering (reopening the database)"
            db = self.engine.open(self.db_path, self.engine.reopen_options(self.options))
            try:
                step = "reading the recovered database"
                read_from = int(time.time() * 1000)
                scanned = dict(db.scan())
                looked_up = {self.space.key(i): db.get(self.space.key(i)) for i in range(self.space.size)}
                read_until = int(time.time() * 1000) + 1
                verdict = verify(self.space, state, histories, scanned, looked_up, read_from, read_until,
                                 meta=db.meta())
                problems, facts = self.engine.inspect_open(db, scanned)
                step = "closing the recovered database"
            finally:
                db.close()
            if not verdict.ok:
                return self._fail(cycle, f"the recovered database differs from the oracle "
                                  f"({len(verdict.mismatches)} keys)", mismatches=verdict.mismatches,
                                  problems=problems, child_stderr=child.stderr())
            step = "checking the directory after recovery"
            problems += self.engine.inspect_closed(self.db_path)
        except OracleError:
            raise
        except Exception as exc:  # noqa: BLE001 - any error of the engine after a crash is a failure
            return self._fail(cycle, f"{type(exc).__name__} while {step}: {exc}",
                              problems=traceback.format_exc().splitlines(), child_stderr=child.stderr())
        if problems:
            return self._fail(cycle, "the engine's checks fail after recovery", problems=problems,
                              child_stderr=child.stderr())

        state = verdict.state
        state.cycle = cycle
        state.save(self.state_path)
        outcomes = [(o.op, o.kind, o.outcome) for o in verdict.in_flight]
        record = {"cycle": cycle, "seed": child_seed, "kill": mode, "delay": round(delay, 4), "ready": ready,
                  "acked_writes": verdict.acked_writes, "in_flight": outcomes, "evidence": evidence,
                  "live_keys": state.live_keys(), **facts}
        with open(os.path.join(self.oracle_dir, "cycles.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        if not config.keep_logs:
            shutil.rmtree(log_dir)

        figures.cycles += 1
        figures.acked_writes += verdict.acked_writes
        figures.acked_synced += verdict.acked_synced
        figures.acked_ttl += verdict.acked_ttl
        figures.acked_maintenance += verdict.acked_maintenance
        figures.acked_kinds.update(verdict.acked_kinds)
        figures.acked_items.update(verdict.acked_items)
        figures.keys_checked += verdict.keys_checked
        figures.torn_lines += verdict.torn_lines
        for outcome in verdict.in_flight:
            if outcome.outcome == "maintenance":
                figures.killed_in_maintenance[outcome.kind] += 1
            else:
                figures.in_flight[outcome.outcome] += 1
                figures.in_flight_by_kind[f"{outcome.kind} {outcome.outcome}"] += 1
        for label in evidence:
            figures.evidence[label] += 1
        figures.note_facts(facts)
        figures.live_keys = state.live_keys()
        return state

    def _aim_and_wait(self, child: _ChildProcess, mode: str, delay: float) -> None:
        """Return at the moment to kill the child."""
        if not child.wait_for("opening", START_TIMEOUT):
            raise RuntimeError(f"the child did not start within {START_TIMEOUT:.0f} s")
        if mode == "during open":
            child.sleep(delay * self._open_seconds)
            return
        opened = time.monotonic()
        if not child.wait_for("ready", START_TIMEOUT):
            raise RuntimeError(f"the child did not open the database within {START_TIMEOUT:.0f} s")
        self._open_seconds = time.monotonic() - opened
        if mode == "during maintenance":
            # Wait for a maintenance call (flush, compaction, checkpoint) to start, then kill within it.
            if child.wait_for("phase ", max(2.0, 4 * self.config.max_delay)):
                child.sleep(delay)
            return
        child.sleep(delay)

    def _fail(self, cycle: int, reason: str, *, mismatches=(), problems=(), child_stderr: str = "") -> None:
        failure = Failure(cycle, reason, list(mismatches), list(problems), self.config.workdir, child_stderr)
        with open(os.path.join(self.config.workdir, "failure.txt"), "w") as f:
            f.write("\n".join(failure.lines(limit=10**9)) + "\n")
        self.figures.failure = failure
        return None


def run_crashtest(config: CrashTestConfig, progress: Callable[[Figures], None] | None = None) -> Figures:
    """Run one engine's crash test; see :class:`CrashTest`."""
    return CrashTest(config).run(progress)
