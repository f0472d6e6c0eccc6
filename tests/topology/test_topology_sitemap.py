"""Site map files: literal keys with spaces/punctuation, hostlist keys, conflicts."""
from pathlib import Path

import pytest

from hpcpredict.daemon.errors import ParseError
from hpcpredict.topology.ibnetdiscover import parse_ibnetdiscover
from hpcpredict.topology.infiniband import placement_from_fabric
from hpcpredict.topology.sitemap import parse_site_map

DATA = Path(__file__).resolve().parents[1] / "data" / "topology"


def test_keys_with_spaces_quotes_guids_and_hostlists():
    mapping = parse_site_map('ib-leaf01 rack01   R1\n"ib-leaf02 rack02" R2  # why\n'
                             "0x7cfe900300a1b203 R3\nib-leaf04 rack04 R4\nnode[001-002] RN\n")
    assert mapping == {"ib-leaf01 rack01": "R1", "ib-leaf02 rack02": "R2", "0x7cfe900300a1b203": "R3",
                       "ib-leaf04 rack04": "R4", "node001": "RN", "node002": "RN"}
    # node-name-map capture: leaves are named "ib-leafNN rackNN"; leaf03 matched by GUID
    fabric = parse_ibnetdiscover((DATA / "infiniband/fattree/ibnetdiscover-node-name-map.txt").read_text())
    p = placement_from_fabric(fabric, mapping)
    assert p.levels == ("switch", "rack")
    assert [p.path(f"node{i:03d}")[1] for i in (1, 17, 33, 49)] == ["R1", "R2", "R3", "R4"]


def test_conflicts_and_bad_lines_name_the_line():
    with pytest.raises(ParseError, match=r"site-map.conflict.txt:2: 'c1-0' is mapped to '0' at line 1"):
        parse_site_map((DATA / "negative/site-map.conflict.txt").read_text(), "site-map.conflict.txt")
    with pytest.raises(ParseError, match="m:2: expected 'KEY VALUE'"):
        parse_site_map("a 1\nlonely\n", "m")
    with pytest.raises(ParseError, match="no entries"):
        parse_site_map("# empty\n")
