"""Fault scenarios run against both engines: what tests and the fault
campaign (``scripts/fault_campaign.py``) inject, and how outcomes are judged.

* :mod:`~lsmkv.faults.workload`: the engines as the scenarios drive them, a
  seeded operation sequence and its oracle (the state after every prefix);
* :mod:`~lsmkv.faults.scenarios`: one injection each (an I/O error or a full
  disk at the Nth call of an operation, a power cut at the Nth call, a bit
  flip in the Nth read of a file kind) and the verdict on what followed;
* :mod:`~lsmkv.faults.campaign`: many seeded injections per kind and engine,
  tallied into the table docs/reliability.md shows.

Every scenario works on real files through :class:`lsmkv.base.fault_fs.FaultInjectionFS`.
"""
