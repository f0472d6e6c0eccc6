"""`hpcpredict topology import|show` end to end on the samples."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from hpcpredict.daemon.cli.main import main

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_import_ibnetdiscover_then_show_json(tmp_path, capsys):
    out_file = tmp_path / "t.json"
    code, out, err = run(capsys, "topology", "import", "--ibnetdiscover",
                         str(DATA / "infiniband/hdr-edge/ibnetdiscover-p.txt"), "--out", str(out_file))
    assert code == 0 and "infiniband, 6 nodes" in out and "carries no hostname" in err
    saved = json.loads(out_file.read_text())
    assert len(saved["warnings"]) == 6 and saved["kind"] == "infiniband"
    code, out, _ = run(capsys, "topology", "show", "--topology", str(out_file), "gpu[01-02],cpu01", "--json")
    shown = json.loads(out)
    assert code == 0 and shown["levels"] == ["switch", "pod"]
    assert shown["nodes"]["cpu01"]["path"] == ["0xb8cef60300aa0201", "MF0;hdr-spine01:MQM8700/U1"]
    assert shown["nodes"]["gpu02"]["path"] == ["0xb8cef60300aa0101", "MF0;hdr-spine01:MQM8700/U1"]
    assert shown["spread"] == {"switch": 2, "pod": 1}


def test_import_cray_with_site_map_and_human_show(tmp_path, capsys):
    out_file = tmp_path / "xc.json"
    code, _, _ = run(capsys, "topology", "import", "--xtprocadmin", str(DATA / "cray/xtprocadmin.xc40-2groups.txt"),
                     "--site-map", str(DATA / "cray/theta-cabinet-to-group.txt"), "--out", str(out_file))
    assert code == 0
    code, out, _ = run(capsys, "topology", "show", "--topology", str(out_file), "nid[00008-00011,00400]")
    assert code == 0
    assert "nid00400  c2-0c0s4a0  c2-0c0  g2" in out           # Theta table: c2-0 -> group 2
    assert "5 nodes span 2 aries(s)" in out and "5 nodes span 2 group(s) (g0: 4, g2: 1)" in out


def test_import_topology_conf_and_scontrol(tmp_path, capsys):
    for option, name in (("--topology-conf", "topology.conf.xc40-2groups"),
                         ("--scontrol-topology", "scontrol-show-topology.xc40-2groups.txt")):
        out_file = tmp_path / f"{name}.json"
        assert run(capsys, "topology", "import", option, str(DATA / "slurm" / name), "--out", str(out_file))[0] == 0
        code, out, _ = run(capsys, "topology", "show", "--topology", str(out_file), "nid00767", "--json")
        assert json.loads(out)["nodes"]["nid00767"]["path"] == ["c3-0c2s15", "c3-0c2", "g1", "xc-top"]


@pytest.mark.parametrize("argv, message", [
    (["import", "--topology-conf", "NEG/topology.conf.node-under-two-leaves", "--out", "OUT"], "listed under two switches"),
    (["import", "--ibnetdiscover", "NEG/ibnetdiscover.garbled.txt", "--out", "OUT"], "ibnetdiscover.garbled.txt:7"),
    (["import", "--xtprocadmin", "NEG/xtprocadmin.truncated.txt", "--out", "OUT"], "xtprocadmin.truncated.txt:301"),
    (["import", "--xtprocadmin", "DATA/cray/xtprocadmin.xc40-2groups.txt", "--site-map",
      "NEG/site-map.conflict.txt", "--out", "OUT"], "site-map.conflict.txt:2"),
    (["import", "--ibnetdiscover", "NEG/missing-file.txt", "--out", "OUT"], "cannot read"),
    (["show", "--topology", "NEG/placement.truncated.json", "node001"], "not valid placement JSON"),
    (["show", "--topology", "GOOD", "node[001-002],nodeX,nodeY"], "2 node(s) not in the tree topology: nodeX, nodeY"),
    (["show", "--topology", "GOOD", "node[001-"], "bad hostlist"),
])
def test_errors_are_one_line_not_tracebacks(tmp_path, capsys, argv, message):
    good = tmp_path / "good.json"
    assert main(["topology", "import", "--topology-conf", str(DATA / "slurm/topology.conf.fattree"),
                 "--out", str(good)]) == 0
    capsys.readouterr()
    argv = [a.replace("NEG", str(DATA / "negative")).replace("DATA", str(DATA))
            .replace("OUT", str(tmp_path / "o.json")).replace("GOOD", str(good)) for a in argv]
    code, _, err = run(capsys, "topology", *argv)
    lines = [line for line in err.splitlines() if line.startswith("hpcpredict:")]
    assert code == 1 and len(lines) == 1 and message in lines[0]
    assert "Traceback" not in err and not (tmp_path / "o.json").exists()


def test_installed_command_runs(tmp_path):
    script = Path(sys.executable).parent / "hpcpredict"   # the console script of this venv
    out_file = tmp_path / "t.json"
    proc = subprocess.run([str(script), "topology", "import", "--topology-conf",
                           str(DATA / "slurm/topology.conf.fattree"), "--out", str(out_file)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out_file.read_text())["nodes"]["node064"]["path"] == ["ib-leaf04", "ib-spine[01-02]"]
    proc = subprocess.run([str(script), "topology", "show", "--topology", str(out_file), "node999"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.strip() == (
        "hpcpredict: 1 node(s) not in the tree topology: node999")
