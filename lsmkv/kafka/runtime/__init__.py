"""lsmkv.kafka.runtime: what runs a load.

The :class:`~lsmkv.kafka.runtime.loader.Loader` and the pieces its threads
are made of: the consume loop (consume.py), commits (commits.py), the
rebalance listener (assignment.py) over the partition contexts
(partitions.py, partition.py), the dispatch of fetched records
(dispatch.py) to processor units (units.py) and the record type and user
processors (processor.py), the commit window (commit_control.py), retries
on the timing wheel (retry.py), the dead-letter producer
(dead_letters.py), the applier that writes completed records with their
offsets (applier.py), the clients' error reports (client_errors.py),
where partitions end (ends.py, end_offsets.py) and the metrics
(metrics.py); the roles a load chooses once: its store (store_role.py),
where its partitions come from (subscription.py) and its changelog
(changelog_role.py). And the serving instance (instance.py): a loader with
its serving parts, built, run and closed from one InstanceSettings.

It builds on lsmkv.kafka's shared modules and on lsmkv.kafka.scaleout's
parts (a shard directory, the changelog, its restore); the tools above
(lsmkv.kafka.tools) run it. docs/architecture.md, "Kafka loading", draws the
three groups.
"""
