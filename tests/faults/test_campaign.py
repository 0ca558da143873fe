"""The fault campaign's tally (scripts/fault_campaign.py prints it)."""

from __future__ import annotations

from lsmkv.faults import campaign, scenarios


def test_a_small_campaign_tallies_every_kind_without_failures(scratch):
    result = campaign.run_campaign(scratch, engines=("btree",), per_kind=1, seed=3, ops_count=60)
    assert not [o.detail for o in result.outcomes if o.failed]
    faults = campaign.fault_rows(result)
    labels = {row[1] for row in faults}
    assert "EIO on sync, then resume()" in labels and "power cut, unsynced data lost" in labels
    assert all(row[2] == sum(row[3:]) for row in faults)  # every injection counted once
    flips = campaign.flip_rows(result)
    assert {row[1] for row in flips} <= {t.label for t in scenarios.FLIP_TARGETS["btree"]}
    totals = campaign.flip_totals(result)["btree"]
    assert totals[scenarios.FAILED] == 0 and totals[scenarios.DETECTED] > 0
