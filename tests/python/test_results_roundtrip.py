"""What a results directory gives back: timings, configs and user-edited integer columns
with missing values (hand-built, no simulation)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from onionlab.results import Results, load

from conftest import fake_run


def test_load_gives_back_the_wall_seconds_per_seed(tmp_path):
    """``timing.json`` nests the seconds under ``wall_seconds``; ``Results.timing`` is the
    seed -> seconds map itself (fake runs: 0.123 s per unit of seed)."""
    Results.from_runs([fake_run(1), fake_run(2)], "").write(tmp_path / "r")
    assert load(tmp_path / "r").timing == {"1": 0.123, "2": 0.246}


def test_config_is_written_with_a_final_newline(tmp_path):
    Results.from_runs([fake_run(1)], "[experiment]").write(tmp_path / "r")
    assert (tmp_path / "r" / "config.toml").read_text() == "[experiment]\n"


def test_an_integer_column_with_missing_values_writes_them_as_nulls(tmp_path):
    """A pandas edit that leaves NaN in an integer column (here ``size``) makes it float;
    written, the NaN is a null and the other values integers again."""
    r = Results.from_runs([fake_run(1)], "")
    d = r.downloads.copy()
    d["size"] = d["size"].astype(float)
    d.loc[0, "size"] = np.nan
    r.downloads = d
    r.write(tmp_path / "r")
    back = load(tmp_path / "r").downloads["size"]
    assert pd.isna(back.iloc[0]) and back.iloc[1:].tolist() == d["size"].iloc[1:].astype(int).tolist()


def test_a_results_config_that_names_files_runs_again_from_the_results(tmp_path):
    """config.toml of a results directory loads as it is: the files it names (here the
    Markov models, under models/ beside the experiment) are copied beside it under the same
    names, and running it again gives the same tables (it once failed: "cannot read
    net/latency.csv" for every generated network's results)."""
    import shutil

    import onionlab
    from onionlab import config as config_mod
    from conftest import TINY

    exp = tmp_path / "exp"
    (exp / "models").mkdir(parents=True)
    data = Path(__file__).resolve().parents[2] / "data" / "traffic"
    for m in ("stream_model.json", "packet_model.json"):
        shutil.copyfile(data / m, exp / "models" / m)
    text = TINY.read_text().replace('duration = "2 min"', 'duration = "10 s"').replace('warmup = "10 s"', 'warmup = "2 s"')
    text += ('\n[[clients]]\nname = "markov"\nworkload = "markov"\ncount = 5\n\n[workloads.markov]\ntype = "markov"\n'
             'stream_model = "models/stream_model.json"\npacket_model = "models/packet_model.json"\n')
    (exp / "e.toml").write_text(text)
    first = onionlab.run(exp / "e.toml", seeds=[1], out=tmp_path / "r1", jobs=1)
    assert (tmp_path / "r1" / "models" / "stream_model.json").read_bytes() == (exp / "models" / "stream_model.json").read_bytes()
    config_mod.check(tmp_path / "r1" / "config.toml")
    again = onionlab.run(tmp_path / "r1" / "config.toml", seeds=[1], out=tmp_path / "r2", jobs=1)
    pd.testing.assert_frame_equal(again.downloads, first.downloads)
    assert (first.downloads["class"] == "markov").any()
