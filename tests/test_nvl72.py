"""--fabric nvl72: racks of 72 GPUs, each one NVLink domain (NCCL's node), one NIC per GPU
on a rail-optimised scale-out network (rail = the GPU's place in its 4-GPU tray), as
:func:`sim.fabric.rail.scale_up_racks` builds it, and lossless collective on it."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from sim.cli import main
from sim.fabric.rail import scale_up_racks
from sim.nic.host import Host


def _leaf_of(rf):
    """host id -> the leaf its NIC is cabled to."""
    out = {}
    for leaf in rf.leaves:
        for p in rf.fabric.nodes[leaf].ports.values():
            if isinstance(p.peer, Host):
                out[p.peer.node_id] = leaf
    return out


def test_two_racks_on_quantum2_leaves():
    """2 racks x 72 GPUs, 4 rails, 64-port switches: each rail's 36 NICs on 2 leaves of 18
    (32 down ports at most), 8 leaves of 32 uplinks, 4 spines of 64 ports; GPU g of every
    rack on a leaf of rail g mod 4."""
    rf = scale_up_racks(2, 72)
    fab = rf.fabric
    assert (len(rf.spines), len(rf.leaves), len(rf.ranks)) == (4, 8, 144)
    assert rf.nodes == 2 and rf.gpus_per_node == 72
    assert {len(fab.nodes[s].ports) for s in rf.spines} == {64}
    assert {len(fab.nodes[leaf].ports) for leaf in rf.leaves} == {18 + 32}
    leaf = _leaf_of(rf)
    for r, h in enumerate(rf.ranks):
        assert fab.names[leaf[h]].startswith(f"leaf{r % 72 % 4}.")
    assert Counter(leaf.values()) == dict.fromkeys(rf.leaves, 18)


def test_a_576_gpu_unit_on_quantum_x800_is_8_leaves_and_4_spines():
    """8 racks (576 GPUs, an SU of the GB200 RA) on 144-port switches: 8 leaves (2 per rail,
    72 NICs each) and 4 spines, the counts NVIDIA's B300 XDR SuperPOD table gives for a
    576-NIC unit on 144-port switches."""
    rf = scale_up_racks(8, 72, radix=144)
    assert (len(rf.leaves), len(rf.spines)) == (8, 4)
    assert {len(rf.fabric.nodes[s].ports) for s in rf.spines} == {144}


@pytest.mark.parametrize("kw, why", [({"rails": 9, "gpus_per_node": 8}, "rails"),
                                     ({"radix": 7}, "radix")])
def test_bad_shapes_are_refused(kw, why):
    with pytest.raises(ValueError, match=why):
        scale_up_racks(2, **{"gpus_per_node": 72, **kw})


def test_collective_on_nvl72_racks(tmp_path, capsys):
    """lossless collective --fabric nvl72: the node is the rack (-p hw=gb200-nvl72 unless
    given: 72 GPUs, NVLink 5), NCCL's tuner runs NVLSTree across racks, the result is
    right, and every byte between racks leaves through a NIC on its rail."""
    out = tmp_path / "r.json"
    assert main(["collective", "allreduce", "-b", "16M", "-e", "16M", "--fabric", "nvl72",
                 "--json", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert "144 ranks (2 nodes x 72 GPUs), fabric nvl72" in first
    assert "NCCL host side gb200-nvl72" in first
    doc = json.loads(out.read_text())
    row = doc["results"][0]
    assert row["wrong"] == 0 and row["algorithm"] == "nvls_tree"
    assert doc["params"]["nvlink_gbps"] == 7200.0 and doc["params"]["hw"] == "gb200-nvl72"
    # a smaller rack of 8 GPUs on 2 rails, -p as for the other kinds
    assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "--fabric", "nvl72", "-p",
                 "gpus_per_node=8", "-p", "rails=2", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["results"][0]["wrong"] == 0
    capsys.readouterr()
    assert main(["collective", "allreduce", "--fabric", "nvl72", "-p", "k=4"]) == 2
    assert "-p k: does not apply to --fabric nvl72" in capsys.readouterr().err


def test_a_rail_fabric_of_72_gpus_per_node_points_to_nvl72(capsys):
    assert main(["collective", "allreduce", "-b", "1M", "-e", "1M", "-p",
                 "gpus_per_node=72"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--fabric nvl72" in err

