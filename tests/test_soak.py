"""The soak at its smallest size: a build + evaluate against the fake server with faults, resumed,
must still complete every result and take no junk. It once stopped measuring without a failing test
(its scripted model met a prompt it did not know); this keeps `python -m bench.soak` working."""

from __future__ import annotations

from bench import soak


def test_the_smallest_soak_completes_every_result_and_takes_no_junk(capsys):
    code = soak.main(["--pairs", "1", "--constraints", "4", "--models", "1", "--judges", "1",
                      "--fault-rate", "0.3", "--seed", "3"])
    out = capsys.readouterr().out
    assert "completed results / expected:" in out and "junk accepted:                0" in out, out
    assert code == 0, out
    served = int(out.split("faults served:")[1].split()[0])
    assert served > 0, out  # the faulty run met faults and survived them
