"""``lsmkv kafka``'s checks of its arguments, which need no broker: a bad
--serve address, a query without exactly one of KEY, --scan or --owners, a
key that is not hex, ``shards`` on a directory that is not a shard
directory; each is one clear line on stderr."""

from __future__ import annotations

import pytest

from lsmkv.kafka.tools.cli import main as kafka_main


def test_cli_bad_input_gets_one_clear_error(tmp_path, capsys):
    base = ["load", "--topic", "t", "--group", "g", "--db", str(tmp_path / "d")]
    assert kafka_main(base + ["--serve", "localhost"]) == 1
    assert "--serve needs HOST:PORT (e.g. 127.0.0.1:8080), not 'localhost'" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:  # usage errors: argparse's exit 2
        kafka_main(["query", "--group", "g"])
    assert usage.value.code == 2 and "needs exactly one of KEY, --scan or --owners" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        kafka_main(["query", "--group", "g", "zz", "--hex"])
    assert usage.value.code == 2 and "'zz' is not hex" in capsys.readouterr().err
    assert kafka_main(["shards", str(tmp_path)]) == 1
    assert "is not a shard directory" in capsys.readouterr().err
