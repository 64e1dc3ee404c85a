"""PredicTor on the paper's toy topology (figure 1, section 5.2, scenario 2: three
endless bulk circuits through one bottleneck, two of them sharing exit1's connection).
Table 1's throughput and fairness columns: round robin gives the circuit with a
connection of its own twice the others' rate (paper: F = 0.685), PredicTor shares the
bottleneck max-min fairly (paper: F = 0.98) at about the same total."""

from __future__ import annotations

import onionlab

from conftest import ROOT, needs_core

TOY = ROOT / "examples" / "predictor-toy.toml"


def rates(out) -> dict[str, float]:
    """Each circuit's rate (bytes/s its entry wrote to its client) once all three run."""
    c = onionlab.load(out).connections
    c = c[c["interval_start"] >= 12]
    return (c.groupby("class")["bytes_written"].sum() / (30 - 12)).to_dict()


def fairness(r: dict[str, float]) -> float:
    """The paper's F against the max-min fair split of what was delivered: with one
    shared bottleneck, an equal share each."""
    total = sum(r.values())
    return 1 - sum(abs(x - total / 3) for x in r.values()) / total


@needs_core
def test_table_1_fairness_on_the_toy_topology(tmp_path):
    onionlab.run(TOY, out=tmp_path / "rr", jobs=1)
    rr = rates(tmp_path / "rr")
    assert set(rr) == {"circuit1", "circuit2", "circuit3"}
    # Round robin: circuit 3 alone on exit2's connection gets about twice the others.
    assert rr["circuit3"] > 1.7 * max(rr["circuit1"], rr["circuit2"]), rr
    assert fairness(rr) < 0.75, rr

    text = TOY.read_text().replace('scheduler = "round-robin"', 'scheduler = "round-robin"\npredictor = {}')
    cfg = tmp_path / "toy-predictor.toml"
    cfg.write_text(text)
    res = onionlab.run(cfg, out=tmp_path / "pt", jobs=1)
    pt = rates(tmp_path / "pt")
    assert fairness(pt) > 0.95, pt
    # About the same total (the paper: 402.4 against 402.3 KB/s); here within 20 %.
    assert sum(pt.values()) > 0.8 * sum(rr.values()), (pt, rr)
    k = res.summary["runs"][0]["counters"]
    assert k["predictor_failed_solves"] == 0 and k["predictor_solves"] == 6 * 750
