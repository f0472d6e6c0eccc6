"""``hpcpredict topology import|show``: build the placement model from what the site's fabric
tools print, and show where nodes sit in it.

    hpcpredict topology import --ibnetdiscover ibnet.txt --out /var/lib/hpcpredict/topology.json
    hpcpredict topology import --xtprocadmin xtprocadmin.txt --site-map cab2group.txt --out t.json
    hpcpredict topology import --topology-conf /etc/slurm/topology.conf --out t.json
    hpcpredict topology show --topology t.json 'node[001-004,040]' [--json]
"""
from __future__ import annotations

import argparse
import json
import sys


def register(subparsers) -> None:
    parser = subparsers.add_parser("topology", help="import the network topology / show node placement")
    sub = parser.add_subparsers(dest="topology_command", metavar="SUBCOMMAND")
    sub.required = True

    imp = sub.add_parser("import", help="parse fabric tool output into a placement JSON")
    source = imp.add_mutually_exclusive_group(required=True)
    source.add_argument("--ibnetdiscover", metavar="FILE",
                        help="saved `ibnetdiscover` output (default, -g or -p format)")
    source.add_argument("--xtprocadmin", metavar="FILE", help="saved Cray `xtprocadmin` listing")
    source.add_argument("--topology-conf", metavar="FILE", help="Slurm topology.conf (topology/tree)")
    source.add_argument("--scontrol-topology", metavar="FILE", help="saved `scontrol show topology` output")
    imp.add_argument("--site-map", metavar="FILE",
                     help="IB: 'LEAF-SWITCH RACK' lines; Cray: 'CABINETS GROUP' lines")
    imp.add_argument("--node-name-map", metavar="FILE",
                     help="IB node-name-map (GUID \"name\") to apply to output captured without it")
    imp.add_argument("--cabinets-per-row", type=int, default=None,
                     help="Cray: cabinets per row for the default group numbering")
    imp.add_argument("--out", required=True, metavar="TOPOLOGY.json", help="where to write the model")
    imp.set_defaults(handler=run_import)

    show = sub.add_parser("show", help="where nodes sit: switches, racks/groups, spread")
    show.add_argument("--topology", required=True, metavar="TOPOLOGY.json")
    show.add_argument("nodelist", metavar="NODELIST", help="hostlist expression, e.g. node[001-016]")
    show.add_argument("--json", action="store_true", help="print one JSON object")
    show.set_defaults(handler=run_show)


def _read(path: str, what: str) -> str:
    from ..errors import ConfigError
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            return stream.read()
    except OSError as error:
        raise ConfigError(f"cannot read {what} {path}: {error.strerror}") from error


def build_placement(args: argparse.Namespace):
    """The Placement the import options describe (pure apart from reading the files)."""
    from ...topology import cray, ibnetdiscover, infiniband, sitemap, slurm_tree

    site_map = sitemap.parse_site_map(_read(args.site_map, "site map"), args.site_map) \
        if args.site_map else None
    if args.ibnetdiscover:
        names = ibnetdiscover.parse_node_name_map(_read(args.node_name_map, "node-name-map"),
                                                  args.node_name_map) if args.node_name_map else None
        fabric = ibnetdiscover.parse_ibnetdiscover(_read(args.ibnetdiscover, "ibnetdiscover output"),
                                                   args.ibnetdiscover, node_name_map=names)
        return infiniband.placement_from_fabric(fabric, site_map)
    if args.xtprocadmin:
        nodes = cray.parse_xtprocadmin(_read(args.xtprocadmin, "xtprocadmin output"), args.xtprocadmin)
        return cray.placement_from_xtprocadmin(nodes, site_map, args.cabinets_per_row, args.xtprocadmin)
    if site_map is not None:
        from ..errors import InvalidRequest
        raise InvalidRequest("--site-map", "only applies to --ibnetdiscover and --xtprocadmin")
    if args.topology_conf:
        tree = slurm_tree.parse_topology_conf(_read(args.topology_conf, "topology.conf"), args.topology_conf)
    else:
        tree = slurm_tree.parse_scontrol_topology(_read(args.scontrol_topology, "scontrol output"),
                                                  args.scontrol_topology)
    return slurm_tree.placement_from_tree(tree)


def run_import(args: argparse.Namespace) -> int:
    placement = build_placement(args)
    placement.save(args.out)
    print(f"wrote {args.out}: {placement.kind}, {len(placement)} nodes, levels "
          f"{', '.join(placement.levels)}, {len(placement.warnings)} warning(s)")
    for warning in placement.warnings[:20]:
        print(f"  warning: {warning}", file=sys.stderr)
    if len(placement.warnings) > 20:
        print(f"  ... {len(placement.warnings) - 20} more warnings in {args.out}", file=sys.stderr)
    return 0


def spread(placement, nodes: list[str]) -> dict[str, dict[str, int]]:
    """Per level: how many nodes sit under each ancestor."""
    result: dict[str, dict[str, int]] = {}
    for level_index, level in enumerate(placement.levels):
        counts: dict[str, int] = {}
        for node in nodes:
            name = placement.path(node)[level_index]
            counts[name] = counts.get(name, 0) + 1
        result[level] = counts
    return result


def run_show(args: argparse.Namespace) -> int:
    from ...topology.hostlist import expand
    from ...topology.placement import Placement

    placement = Placement.load(args.topology)
    nodes = expand(args.nodelist, source="NODELIST")
    placement.encode(nodes)  # raises UnknownNode listing every unknown name
    by_level = spread(placement, nodes)
    if args.json:
        print(json.dumps({
            "nodes": {n: {"path": list(placement.path(n))} for n in nodes},
            "levels": list(placement.levels),
            "kind": placement.kind,
            "spread": {level: len(counts) for level, counts in by_level.items()},
        }))
        return 0
    width = max(len(n) for n in nodes)
    print(f"{'node':<{width}}  " + "  ".join(placement.levels))
    for node in nodes:
        print(f"{node:<{width}}  " + "  ".join(placement.path(node)))
    print()
    for level, counts in by_level.items():
        detail = ", ".join(f"{name}: {count}" for name, count in sorted(counts.items()))
        print(f"{len(nodes)} nodes span {len(counts)} {level}(s) ({detail})")
    return 0
