"""lsmkv.kafka.scaleout: the parts of partitioned state and serving.

Partitioned state and reads of it: the shard directory (shards.py), the
placement tally of a shard's keys (placement.py), the routing of a read
to a partition (routing.py); the changelog topic (changelog.py) and
restoring a shard from it (restore.py); a serving group: standby copies
(standby.py), the lag-aware assignor (assignor.py, pure), the
coordination group member (group_member.py) and the glue that runs the
assignment (coordination.py), the member announcements (members.py), the
query server (serve.py) and the client that asks a group (client.py);
and the settings of one instance (instance_settings.py: every knob of
``lsmkv kafka load``, the scale-out knobs' defaults, the rules between
them).

These parts import nothing of lsmkv.kafka.runtime: those that work beside
a running loader are handed it and use only the few methods it offers
(``settings``, ``shards``, ``metrics``, ``held()``, ``restoring()``,
``restore_lag()``, ``placements()``, ``shard_of()``, ``set_assignment()``).
docs/architecture.md, "Kafka loading", draws the three groups.
"""
