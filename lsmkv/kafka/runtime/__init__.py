"""lsmkv.kafka.runtime: what runs a load.

The :class:`~lsmkv.kafka.runtime.loader.Loader` and the pieces its threads
are made of: the commit window (commit_control.py), processor units
(units.py) and the record type and user processors (processor.py),
retries on the timing wheel (retry.py), the dead-letter producer
(dead_letters.py), the applier that writes completed records with their
offsets (applier.py), the state kept per assigned partition
(partition.py), the metrics (metrics.py) and where a partition ends
(end_offsets.py).

It builds on lsmkv.kafka's shared modules and on lsmkv.kafka.scaleout's
parts (a shard directory, the changelog, its restore); the tools above
(lsmkv.kafka.tools) run it. docs/kafka.md, "Package layout", draws the
three groups.
"""
