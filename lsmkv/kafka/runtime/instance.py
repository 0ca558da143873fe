"""ServingInstance: one loader instance, built and run from one InstanceSettings.

Kafka Streams' ``KafkaStreams`` in lsmkv's terms: what ``lsmkv kafka load``
runs, as a library class. From the settings
(scaleout/instance_settings.py) it builds

* the :class:`~.loader.Loader` (one store, or a shard directory with
  ``partitioned``);
* with ``serve``, around a shard directory it opens itself (the standby
  replicator writes it too, and must stop before it closes): the query
  server (scaleout/serve.py), the lag-aware coordination of the group's
  assignment (scaleout/coordination.py; the loader takes its partitions
  from it), the standby replicator keeping the copies the assignment
  gives this instance (scaleout/standby.py) and the announcer of what it
  holds on ``<group>-members`` (scaleout/members.py);

and owns the order in which they start and stop. Building waits for the
servers and the topics first when the settings ask for it (a start-up
timeout), so an instance that cannot start creates nothing.

    with ServingInstance(settings) as instance:    # built, and loading on a thread of its own
        ...                                        # instance.url serves; StoreClient reads the group
    # stopped: drained, committed, withdrawn, closed

    summary = ServingInstance(settings).run()      # or: load in this thread until stopped or caught up

:meth:`stop` (any thread, a signal handler) asks the loader to drain and
commit; the run then closes the parts, serving parts first: the
coordination (leaving the group, whose others rebalance at once), the
announcer (its withdrawal), the standby replicator, the query server,
and last the shard directory. Library code: it logs, never prints.
"""

from __future__ import annotations

import logging
import threading

from ..errors import LoaderError
from ..scaleout.instance_settings import InstanceSettings
from .loader import Loader, LoadSummary, check_startup

log = logging.getLogger(__name__)


class ServingInstance:
    """One instance of a loader group, as ``settings`` describe it: built by
    :meth:`open` (or by :meth:`start`, :meth:`run` and ``with``), loading
    until stopped (or caught up), then closed."""

    def __init__(self, settings: InstanceSettings) -> None:
        if not isinstance(settings, InstanceSettings):
            raise TypeError(f"settings must be InstanceSettings, not {type(settings).__name__}")
        self.settings = settings
        #: The loader (None before :meth:`open`).
        self.loader: Loader | None = None
        #: The serving parts (None without ``serve``, or before :meth:`open`).
        self.server = None
        self.coordination = None
        self.standby = None
        self.announcer = None
        self._shards = None
        self._open_lock = threading.Lock()
        self._closed = False
        self._parts_closed = False
        self._running = False
        #: Set once a run has returned and closed the parts.
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self._summary: LoadSummary | None = None
        self._error: BaseException | None = None
        self._error_reported = False
        self._stop_reason: str | None = None

    # -- what others read -------------------------------------------------------------------------

    @property
    def url(self) -> str | None:
        """The URL the instance serves at (None: not serving, or not open yet)."""
        return None if self.server is None else self.server.url

    @property
    def members_topic(self) -> str | None:
        """The topic this instance is announced on (None: not serving, or not open yet)."""
        return None if self.announcer is None else self.announcer.topic

    @property
    def summary(self) -> LoadSummary | None:
        """How the run ended (None: it has not ended, or it failed)."""
        return self._summary

    def snapshot(self) -> dict:
        """The loader's metrics now (Loader.snapshot); {} before :meth:`open`."""
        return {} if self.loader is None else self.loader.snapshot()

    # -- the life cycle ---------------------------------------------------------------------------

    def open(self) -> ServingInstance:
        """Build the loader and, with ``serve``, the serving parts (the
        query server listens, the coordination joins the group, the
        announcer announces) without loading yet. Done once; :meth:`start`
        and :meth:`run` call it."""
        with self._open_lock:
            if self._closed:
                raise LoaderError("this instance is closed (make a new ServingInstance to load again)")
            if self.loader is None:
                self._build()
                if self._stop_reason is not None:   # stopped before it was built
                    self.loader.stop(self._stop_reason)
        return self

    def run(self) -> LoadSummary:
        """Load in the calling thread until stopped (or, with
        ``until_caught_up``, caught up), then close the parts; the run's
        summary. Once per instance."""
        self.open()
        with self._open_lock:
            if self._running or self._done.is_set():
                raise LoaderError("this instance runs once (make a new ServingInstance to load again)")
            self._running = True
        try:
            self._summary = self.loader.run()
            return self._summary
        except BaseException as exc:
            self._error = exc
            raise
        finally:
            try:
                self._close_parts()
            finally:
                self._running = False
                self._done.set()

    def start(self) -> ServingInstance:
        """:meth:`run` on a thread of its own (a daemon: :meth:`close` it, or
        use the instance as a context manager, before the program ends)."""
        self.open()
        with self._open_lock:
            if self._thread is not None:
                raise LoaderError("this instance is already started")
            self._thread = threading.Thread(target=self._run_in_background, name="lsmkv-kafka-instance",
                                            daemon=True)
        self._thread.start()
        return self

    def _run_in_background(self) -> None:
        try:
            self.run()
        except BaseException as exc:  # noqa: BLE001 - kept for wait() and close()
            log.error("the instance's run failed: %r", exc)
        finally:
            if not self._running:   # (closed before the run began: nothing ran, nothing to wait for)
                self._done.set()

    def stop(self, reason: str = "stopped") -> None:
        """Ask the run to drain, commit and return (any thread, a signal
        handler; before the run starts, it returns at once)."""
        if self._stop_reason is None:
            self._stop_reason = reason
        loader = self.loader
        if loader is not None:
            loader.stop(reason)

    def wait(self, timeout: float | None = None) -> LoadSummary | None:
        """Wait up to ``timeout`` seconds (None: as long as it takes) for
        the run to end; its summary (None: still running). A failed run
        raises its error here."""
        if not self._done.wait(timeout):
            return None
        if self._error is not None:
            self._error_reported = True
            raise self._error
        return self._summary

    def close(self) -> LoadSummary | None:
        """Stop, wait for the run to end, close every part (once); the
        run's summary (None: it never ran). A run that failed raises its
        error here, unless :meth:`wait` raised it already."""
        self.stop("closed")
        with self._open_lock:
            self._closed = True
            running = self._running or (self._thread is not None and not self._done.is_set())
        if running:
            self._done.wait()   # the run closes the parts as it ends
        elif not self._done.is_set():
            try:
                self._close_parts()   # built but never run
            finally:
                self._done.set()
        if self._error is not None and not self._error_reported:
            self._error_reported = True
            raise self._error
        return self._summary

    def __enter__(self) -> ServingInstance:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
            return
        try:
            self.close()
        except BaseException as error:  # noqa: BLE001 - the exception leaving the block is the one to see
            log.error("closing the instance after %s: %r", exc_type.__name__, error)

    # -- building and closing ---------------------------------------------------------------------

    def _build(self) -> None:
        s = self.settings
        settings = s.loader_settings()
        address = s.address()
        if address is None:
            self.loader = Loader(settings, s.db, engine=s.engine, store_options=dict(s.store_options),
                                 partitioned=s.partitioned)
            return
        from ..scaleout.coordination import LagAwareCoordination
        from ..scaleout.members import Announcer
        from ..scaleout.serve import QueryServer
        from ..scaleout.shards import ShardedStore
        from ..scaleout.standby import StandbyReplicator
        check_startup(settings)   # before the shard directory is created (the loader checks again, quickly)
        self._shards = ShardedStore(s.db, s.engine, topic=settings.topics[0], options=dict(s.store_options))
        try:
            self.loader = Loader(settings, self._shards)
            self.server = QueryServer(self.loader, *address, advertised=s.advertise)
            # A serving group assigns partitions lag-aware: actives go to
            # caught-up copies, standbys and warm-ups are placed by the
            # group leader and kept by the standby replicator.
            self.coordination = self.server.coordination = LagAwareCoordination(
                self.loader, self.server.url, **s.lag_aware())
            self.standby = self.server.standby = self.coordination.standby = StandbyReplicator(
                self.loader, self.server.url, s.standby_replicas, wanted=self.coordination.copies)
            self.announcer = Announcer(self.loader, self.server.url, standby=self.standby)
        except BaseException:
            self._closed = True   # a failed instance is not built again
            self._close_parts()
            raise
        log.info("serving %s (group %s, announced on %s)", self.server.url, s.group, self.announcer.topic)

    def _close_parts(self) -> None:
        """Close what was built, serving parts first, the shard directory
        last; every part is closed even if one fails (the first failure
        is raised after). Once."""
        if self._parts_closed:
            return
        self._parts_closed = True
        failed: BaseException | None = None
        if self.loader is not None and self._shards is None:
            parts = [self.loader]   # its own store: closed by its run, or here if it never ran
        else:
            parts = [self.coordination, self.announcer, self.standby, self.server, self._shards]
        for part in parts:
            if part is None:
                continue
            try:
                part.close()
            except BaseException as exc:  # noqa: BLE001 - the others still close
                log.warning("closing %s: %r", type(part).__name__, exc)
                failed = failed or exc
        if failed is not None:
            raise failed
