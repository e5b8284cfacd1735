"""Captures named in an experiment spec: validated against the spec and the topology."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_labs_capture import pcap, sample_frames

from mcclab.analysis.captures import capture_section
from mcclab.experiment.captures import file_name
from mcclab.experiment.loader import resolve
from mcclab.model.loader import SpecError

SPEC = """\
name: capture-unit
topology: topologies/chain3.yaml
duration: 10s
flows:
  - {name: cbr, type: multicast, protocol: cbr, sender: src, receivers: [h3n1],
     params: {rate: 200kbit, packet_size: 500B}}
captures:
{captures}
"""


def spec(tmp_path: Path, captures: str) -> Path:
    path = tmp_path / "capture-unit.yaml"
    path.write_text(SPEC.replace("{captures}", captures))
    return path


def test_captures_are_parsed(tmp_path):
    res = resolve(str(spec(tmp_path, "  - {on: r2-r3, filter: pim}\n  - {on: h3n1}")))
    caps = res.experiment.captures
    assert [(c.on, c.filter) for c in caps] == [("r2-r3", "pim"), ("h3n1", "routing")]


@pytest.mark.parametrize(
    ("captures", "field", "reason"),
    [
        ("  - {on: r2-r3, colour: red}", "captures[0].colour", "unknown key"),
        ("  - {filter: pim}", "captures[0].on", "Field required"),
        ("  - {on: r1-r3}", "captures[0].on", "no link between r1 and r3"),
        ("  - {on: r2}\n  - {on: zz}", "captures[1].on", "neither a node nor a link"),
        ("  - {on: R2}", "captures[0].on", "String should match pattern"),
    ],
)
def test_bad_captures_name_file_and_field(tmp_path, captures, field, reason):
    path = spec(tmp_path, captures)
    with pytest.raises(SpecError) as info:
        resolve(str(path))
    assert info.value.path == str(path)
    assert any(f == field and reason in r for f, r in info.value.problems), info.value.problems


def test_file_names_and_report_section(tmp_path):
    from mcclab.capture import Target

    assert file_name(3, Target("r2", "r2-eth1", "r2-r3"), "pim") == "03-r2-r3-pim.pcap"
    assert file_name(0, Target("h1", None, "h1"), "udp port 5") == "00-h1-bpf.pcap"
    assert capture_section(tmp_path) == ""
    folder = tmp_path / "captures"
    folder.mkdir()
    (folder / "00-r2-h2a-routing.pcap").write_bytes(pcap(sample_frames()))
    (folder / "captures.json").write_text(
        '[{"file": "00-r2-h2a-routing.pcap", "on": "r2-h2a", "filter": "routing", "started": 99.0}]'
    )
    html = capture_section(tmp_path)
    assert "<h3>r2-h2a (routing)</h3>" in html
    assert "igmp-leave 1" in html and "pim-join 1" in html
    assert "<td>1.000</td><td><code>10.0.3.2 &gt; 224.0.0.22 IGMPv3 report: TO_EX" in html
