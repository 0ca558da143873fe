"""lsmkv.kafka.tools: what is run on top of the loader.

The ``lsmkv kafka`` command (cli.py, the only module of lsmkv.kafka that
prints), the end-to-end demonstration (demo.py), the embedded broker
(broker.py), a seeded keyed workload and its expected table (workload.py)
and publishing it (producer.py), and the one-record-at-a-time loop the
benchmark compares the loader against (naive.py). docs/architecture.md,
"Kafka loading", draws the three groups.
"""
