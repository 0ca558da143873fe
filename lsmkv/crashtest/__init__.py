"""The crash-test driver (``lsmkv crashtest``, ``scripts/crashtest``).

A child process writes to a database from several threads while logging
what it does; the driver kills it with SIGKILL at random moments, reopens the
database, checks every key against that log, runs the engine's checker, and
repeats. Modules, one concept each:

* :mod:`.keyspace`: the keys, which thread owns each, and values that name
  the operation that wrote them;
* :mod:`.oracle`: the crash-safe operation logs, the expected state, and the
  check of a recovered database against them;
* :mod:`.workload`: the seeded stream of operations of one thread;
* :mod:`.child`: the child process (``python -m lsmkv.crashtest.child``);
* :mod:`.engines`: per engine, the options, maintenance calls and checks;
* :mod:`.driver`: the cycles (start, kill, recover, verify, check);
* :mod:`.figures`: the counters of a run and the report of a failure.

The library never prints: :func:`lsmkv.crashtest.driver.run_crashtest`
returns :class:`~lsmkv.crashtest.figures.Figures`; ``lsmkv crashtest`` prints
them. This file imports nothing, so that ``python -m lsmkv.crashtest.child``
loads only what the child needs.
"""
