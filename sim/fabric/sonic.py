"""A SONiC switch's buffer and QoS configuration as the switch model's settings.

SONiC keeps a switch's configuration in ``config_db.json`` (one JSON object of tables, each
``{key: {field: value}}``; a key of several parts joined by ``|``, e.g. ``Ethernet0|3``).
The tables read (sonic-swss ``cfgmgr/buffermgr.cpp``, ``orchagent/bufferorch.cpp``,
``qosorch.cpp``; their YANG models in sonic-buildimage ``src/sonic-yang-models``):

* ``PORT_QOS_MAP``: a port's ``pfc_enable`` (its lossless priorities, "3,4"), the PGs the
  switch pauses (with ``TC_TO_PRIORITY_GROUP_MAP``: the identity on them is checked);
* ``BUFFER_POOL``: ``ingress_lossless_pool``'s ``size``, ``mode`` and ``xoff`` (a shared
  headroom pool);
* ``BUFFER_PROFILE`` / ``BUFFER_PG``: the lossless PG's profile, ``size``, ``xon``,
  ``xoff``, ``xon_offset`` and ``dynamic_th`` (or ``static_th``); when the switch has not
  made them yet (its ``buffermgrd`` does, from the port's speed and cable length), from the
  platform's ``pg_profile_lookup.ini`` (``speed cable size xon xoff threshold
  [xon_offset]``: the threshold column is the profile's ``dynamic_th``) and
  ``CABLE_LENGTH`` / ``PORT``'s ``speed`` (Mb/s);
* ``WRED_PROFILE`` of the lossless queues (``QUEUE`` ``EthernetN|3``'s ``wred_profile``):
  ``green_min_threshold`` / ``green_max_threshold`` (bytes) and ``green_drop_probability``
  (percent) when ``ecn`` marks green (``ecn_green``, ``ecn_all``...): RED's Kmin, Kmax, Pmax
  (SONiC sets the WRED weight to 0: the instantaneous queue);
* ``SCHEDULER`` of the port's queues (``QUEUE``'s ``scheduler``): DWRR weights;
* ``PFC_WD`` (per port ``action``, ``detection_time``, ``restoration_time`` in ms;
  ``GLOBAL`` ``POLL_INTERVAL``): the switch's PFC watchdog, polling every
  ``POLL_INTERVAL``, acting after ``ceil(detection_time / POLL_INTERVAL)`` polls
  (``drop`` or ``forward``; ``alert`` only reports in SONiC: none).

How they become the model (:class:`sim.net.mmu.MmuConfig`, one shared pool per switch):
the dynamic threshold's alpha is ``2 ** dynamic_th`` (SAI ``saibuffer.h``,
SHARED_DYNAMIC_TH: "the threshold is set to the 2^n of available buffer of the pool";
NVIDIA's SAI reads 7 and above as no limit, -8 and below as none); the PG's headroom is
``xoff``; what differs is the vendor's meaning of ``size``:

* Spectrum (NVIDIA/Mellanox): ``size`` is the PG's private buffer, headroom included
  (``xon + xoff``, as the SN5600's table has it); the pool's ``size`` is the shared part
  only.  Reserved = ``size - xoff``; the buffer = pool + every port's reserves and headroom;
  XON hysteresis ``size - xon - xoff`` (sonic-mgmt's Mellanox QoS parameters).
* Tomahawk (Broadcom): ``size`` is the PG's guaranteed minimum, ``xoff`` its headroom; the
  pool's ``size`` holds them; XON hysteresis ``xon_offset``.

A profile whose ``size`` holds ``xon + xoff`` reads as Spectrum's, else as Tomahawk's
(``vendor`` overrides).  A shared headroom pool (the pool's ``xoff``) is not modelled: each
lossless PG gets its own headroom, ``xoff``, or the pool's ``xoff`` split evenly when
every PG's would not fit in it; the report says which.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any

__all__ = ["SonicError", "SonicSwitch", "read_sonic", "sonic_text", "switch_keys"]

POOL = "ingress_lossless_pool"
#: ecn modes that mark green frames (SAI_ECN_MARK_MODE_*)
_GREEN = {"ecn_green", "ecn_green_yellow", "ecn_green_red", "ecn_all"}


class SonicError(ValueError):
    """A configuration that cannot be read or used: names the file, table, key and field."""


@dataclass(slots=True)
class SonicSwitch:
    """What a switch's configuration says of its lossless traffic, from one port's
    settings (``port``): everything in bytes."""

    files: list[str]
    port: str
    vendor: str  # "spectrum" | "tomahawk"
    lossless: list[int]
    speed_mbps: int | None
    cable: str | None
    pool_bytes: int
    pool_mode: str
    shared_headroom_bytes: int
    profile: str
    size_bytes: int
    xon_bytes: int
    xoff_bytes: int
    xon_offset_bytes: int | None
    dynamic_th: int | None
    static_th_bytes: int | None
    ecn: dict[str, Any] | None
    weights: dict[int, int] | None
    watchdog: dict[str, Any] | None
    used: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    #: ports the configuration lists (PORT, else PORT_QOS_MAP): the switch's, by default
    listed_ports: int = 0

    @property
    def reserved_bytes(self) -> int:
        """Guaranteed bytes per (port, PG): Spectrum's private buffer less its headroom,
        Tomahawk's minimum."""
        if self.vendor == "spectrum":
            return max(self.size_bytes - self.xoff_bytes, 0)
        return self.size_bytes

    @property
    def xon_delta_bytes(self) -> int:
        if self.vendor == "spectrum":
            return max(self.size_bytes - self.xon_bytes - self.xoff_bytes, 0)
        return self.xon_offset_bytes if self.xon_offset_bytes is not None else 0

    @property
    def alpha(self) -> Fraction | None:
        """The dynamic threshold's factor (None: static, or no limit)."""
        if self.dynamic_th is None or self.dynamic_th >= 7:
            return None
        return Fraction(2) ** self.dynamic_th


def _load(paths: Sequence[str | Path]) -> tuple[dict[str, Any], dict[str, str]]:
    """The tables of every file merged (a later file's keys win), and which file each
    table came from."""
    doc: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for p in paths:
        try:
            with open(p, encoding="utf-8") as f:
                one = json.load(f)
        except OSError as e:
            raise SonicError(f"{p}: cannot read: {e.strerror or e}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise SonicError(f"{p}: not JSON ({e})") from None
        if not isinstance(one, dict):
            raise SonicError(f"{p}: not a config_db (a JSON object of tables)")
        for table, rows in one.items():
            if not isinstance(rows, dict):
                raise SonicError(f"{p}: {table}: not a table (an object of keys)")
            for key, row in rows.items():
                if not isinstance(row, dict):
                    raise SonicError(f"{p}: {table}|{key}: not an object of fields")
            doc.setdefault(table, {}).update(rows)
            origin[table] = str(p)
    return doc, origin


def _int(doc_path: str, where: str, value: Any) -> int:
    try:
        return int(str(value).strip())
    except ValueError:
        raise SonicError(f"{doc_path}: {where}: {value!r} is not a whole number") from None


def read_pg_lookup(path: str | Path) -> dict[tuple[int, str], dict[str, int]]:
    """``pg_profile_lookup.ini``: (speed in Mb/s, cable) -> size, xon, xoff, threshold
    (and xon_offset where the table has it), as buffermgrd reads it: ``#`` lines skipped,
    whitespace-separated columns."""
    out: dict[tuple[int, str], dict[str, int]] = {}
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as e:
        raise SonicError(f"{path}: cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SonicError(f"{path}: not a text file") from None
    names = ("size", "xon", "xoff", "threshold", "xon_offset")
    for no, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cols = line.split()
        if len(cols) not in (6, 7):
            raise SonicError(f"{path}:{no}: {len(cols)} columns, not 'speed cable size xon "
                             f"xoff threshold [xon_offset]'")
        try:
            vals = [int(c) for c in (cols[0], *cols[2:])]
        except ValueError:
            raise SonicError(f"{path}:{no}: a column that is not a whole number") from None
        out[(vals[0], cols[1])] = dict(zip(names, vals[1:], strict=False))
    if not out:
        raise SonicError(f"{path}: no profile line")
    return out


def _ranges(pgs: list[int]) -> set[str]:
    """BUFFER_PG key suffixes of lossless PGs: buffermgrd's contiguous ranges ('3-4')."""
    out, run = set(), [pgs[0]]
    for p in pgs[1:]:
        if p == run[-1] + 1:
            run.append(p)
        else:
            out.add(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
            run = [p]
    out.add(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return out


def read_sonic(paths: Sequence[str | Path], *, pg_lookup: str | Path | None = None,
               port: str | None = None, speed_mbps: int | None = None,
               cable: str | None = None, vendor: str | None = None,
               default_speed_mbps: int | None = None) -> SonicSwitch:
    """The lossless settings of one port (``port``; default: the first of the ports whose
    ``pfc_enable`` and cable length are the most common) of the configuration in ``paths``
    (config_db.json, or several files holding its tables).  ``pg_lookup``: the platform's
    ``pg_profile_lookup.ini``, needed when the configuration has no lossless PG profile of
    its own; ``speed_mbps`` (default: the port's ``PORT`` speed) and ``cable`` (default:
    its ``CABLE_LENGTH``) pick the row, ``default_speed_mbps`` when the port has no speed
    (the fabric's link rate); ``vendor``: "spectrum" or "tomahawk" (default: from
    the profile).  :class:`SonicError` names the file and what is missing."""
    files = [str(p) for p in paths]
    doc, origin = _load(paths)
    used: list[str] = []
    notes: list[str] = []

    def table(name: str) -> dict[str, Any]:
        return doc.get(name, {})

    def src(name: str) -> str:
        return origin.get(name, files[-1])

    qos = table("PORT_QOS_MAP")
    pfc = {k: v.get("pfc_enable") for k, v in qos.items() if isinstance(v, dict)
           and v.get("pfc_enable")}
    if not pfc:
        raise SonicError(f"{', '.join(files)}: PORT_QOS_MAP: no port with pfc_enable (no "
                         f"lossless priority to model)")
    cables = next(iter(table("CABLE_LENGTH").values()), {}) if table("CABLE_LENGTH") else {}
    if port is None:
        common = Counter((pfc[p], cables.get(p)) for p in pfc).most_common(1)[0][0]
        port = sorted((p for p in pfc if (pfc[p], cables.get(p)) == common),
                      key=lambda n: (len(n), n))[0]
    elif port not in pfc:
        raise SonicError(f"{src('PORT_QOS_MAP')}: PORT_QOS_MAP|{port}: no pfc_enable "
                         f"(ports with one: {', '.join(sorted(pfc)[:8])}...)")
    try:
        lossless = sorted({int(x) for x in str(pfc[port]).split(",")})
    except ValueError:
        raise SonicError(f"{src('PORT_QOS_MAP')}: PORT_QOS_MAP|{port}: pfc_enable "
                         f"{pfc[port]!r} is not a list of priorities") from None
    if not lossless or not all(0 <= p <= 7 for p in lossless):
        raise SonicError(f"{src('PORT_QOS_MAP')}: PORT_QOS_MAP|{port}: pfc_enable "
                         f"{pfc[port]!r}: priorities are 0..7")
    used.append(f"PORT_QOS_MAP|{port}.pfc_enable")
    tc_pg = table("TC_TO_PRIORITY_GROUP_MAP")
    mapname = qos[port].get("tc_to_pg_map")
    if mapname and mapname in tc_pg:
        bad = [p for p in lossless if str(tc_pg[mapname].get(str(p), p)) != str(p)]
        if bad:
            notes.append(f"TC_TO_PRIORITY_GROUP_MAP|{mapname} maps lossless priority "
                         f"{bad[0]} to PG {tc_pg[mapname][str(bad[0])]}: the model pauses "
                         f"PG = priority")
        used.append(f"TC_TO_PRIORITY_GROUP_MAP|{mapname}")

    pools = table("BUFFER_POOL")
    if POOL not in pools:
        raise SonicError(f"{', '.join(files)}: BUFFER_POOL|{POOL}: missing (the buffer "
                         f"tables of config_db.json are needed)")
    pool = pools[POOL]
    where = src("BUFFER_POOL")
    pool_bytes = _int(where, f"BUFFER_POOL|{POOL}.size", pool.get("size"))
    pool_mode = str(pool.get("mode", "dynamic"))
    shp = _int(where, f"BUFFER_POOL|{POOL}.xoff", pool.get("xoff", 0))
    used.append(f"BUFFER_POOL|{POOL}.size,mode" + (",xoff" if "xoff" in pool else ""))

    port_tab = table("PORT").get(port, {})
    if speed_mbps is None and "speed" in port_tab:
        speed_mbps = _int(src("PORT"), f"PORT|{port}.speed", port_tab["speed"])
        used.append(f"PORT|{port}.speed")
    if speed_mbps is None and default_speed_mbps is not None:
        speed_mbps = default_speed_mbps
        notes.append(f"{port} has no PORT speed: {speed_mbps} Mb/s assumed (the links' rate)")
    if cable is None and port in cables:
        cable = str(cables[port])
        used.append(f"CABLE_LENGTH|{next(iter(table('CABLE_LENGTH')))}.{port}")
    # the lossless PG's profile: the configuration's own, else buffermgrd's from the table
    profiles = table("BUFFER_PROFILE")
    prof_name, prof = None, None
    for key in (f"{port}|{r}" for r in _ranges(lossless)):
        row = table("BUFFER_PG").get(key)
        if row and str(row.get("profile", "")).strip("[]").split("|")[-1] in profiles:
            prof_name = str(row["profile"]).strip("[]").split("|")[-1]
            prof = profiles[prof_name]
            used.append(f"BUFFER_PG|{key}")
            break
    if prof is None and speed_mbps is not None and cable is not None:
        name = f"pg_lossless_{speed_mbps}_{cable}_profile"
        if name in profiles:
            prof_name, prof = name, profiles[name]
    if prof is None:
        if pg_lookup is None:
            raise SonicError(f"{', '.join(files)}: no lossless PG profile for {port} "
                             f"(BUFFER_PG|{port}|{'-'.join(map(str, lossless))}): give the "
                             f"platform's pg_profile_lookup.ini, which the switch's "
                             f"buffermgrd makes it from")
        if speed_mbps is None or cable is None:
            raise SonicError(f"{pg_lookup}: a row is picked by the port's speed and cable "
                             f"length: {port} has no "
                             f"{'PORT speed' if speed_mbps is None else 'CABLE_LENGTH'}")
        rows = read_pg_lookup(pg_lookup)
        row = rows.get((speed_mbps, cable))
        if row is None:
            have = sorted({f"{s}/{c}" for s, c in rows})
            raise SonicError(f"{pg_lookup}: no row for speed {speed_mbps} and cable {cable} "
                             f"(rows: {', '.join(have[:10])}...)")
        prof_name = f"pg_lossless_{speed_mbps}_{cable}_profile"
        mode_th = "static_th" if pool_mode == "static" else "dynamic_th"
        prof = {"size": row["size"], "xon": row["xon"], "xoff": row["xoff"],
                mode_th: row["threshold"],
                **({"xon_offset": row["xon_offset"]} if "xon_offset" in row else {})}
        used.append(f"{Path(pg_lookup).name}: {speed_mbps} {cable}")
        notes.append(f"lossless PG profile {prof_name} made from {Path(pg_lookup).name} as "
                     f"buffermgrd makes it (speed {speed_mbps} Mb/s, cable {cable})")
    else:
        used.append(f"BUFFER_PROFILE|{prof_name}")
    pw = src("BUFFER_PROFILE")
    vals = {k: _int(pw, f"BUFFER_PROFILE|{prof_name}.{k}", prof[k])
            for k in ("size", "xon", "xoff", "xon_offset", "dynamic_th", "static_th")
            if k in prof}
    if "xoff" not in vals:
        raise SonicError(f"{pw}: BUFFER_PROFILE|{prof_name}: no xoff: not a lossless "
                         f"profile")
    if vendor is None:
        vendor = ("spectrum" if vals.get("size", 0) >= vals.get("xon", 0) + vals["xoff"]
                  else "tomahawk")
        notes.append(f"size {vals.get('size', 0)} {'>=' if vendor == 'spectrum' else '<'} "
                     f"xon + xoff ({vals.get('xon', 0) + vals['xoff']}): read as "
                     f"{'Spectrum' if vendor == 'spectrum' else 'Tomahawk'}'s meaning of size")
    elif vendor not in ("spectrum", "tomahawk"):
        raise SonicError(f"vendor {vendor!r}: spectrum or tomahawk")
    dth = vals.get("dynamic_th")
    if dth is not None and dth <= -8 and vendor == "spectrum":
        raise SonicError(f"{pw}: BUFFER_PROFILE|{prof_name}.dynamic_th {dth}: no shared "
                         f"buffer for a lossless PG")
    if dth is not None and dth >= 7:
        notes.append(f"dynamic_th {dth}: no limit on a PG's share (NVIDIA's SAI reads 7 "
                     f"and above as infinite): XOFF when the pool is full")

    # ECN: the WRED profile of the port's first lossless queue
    ecn = None
    wred = table("WRED_PROFILE")
    queues = table("QUEUE")
    for q in lossless:
        qrow = queues.get(f"{port}|{q}") or next(
            (v for k, v in queues.items() if k.split("|")[0] == port
             and q in _qset(k.split("|")[-1])), None)
        if qrow and qrow.get("wred_profile") in wred:
            name = qrow["wred_profile"]
            w = wred[name]
            ww = src("WRED_PROFILE")
            if str(w.get("ecn", "ecn_none")) in _GREEN and \
                    str(w.get("wred_green_enable", "false")).lower() == "true":
                ecn = {"profile": name, "queue": q,
                       "kmin_bytes": _int(ww, f"WRED_PROFILE|{name}.green_min_threshold",
                                          w.get("green_min_threshold")),
                       "kmax_bytes": _int(ww, f"WRED_PROFILE|{name}.green_max_threshold",
                                          w.get("green_max_threshold")),
                       "pmax": _int(ww, f"WRED_PROFILE|{name}.green_drop_probability",
                                    w.get("green_drop_probability", 100)) / 100,
                       "mode": str(w.get("ecn"))}
                used.append(f"WRED_PROFILE|{name}.green_*,ecn")
            else:
                notes.append(f"WRED_PROFILE|{name}: ecn {w.get('ecn', 'ecn_none')!r} marks no "
                             f"green frame: no ECN")
            break
    # DWRR weights of the port's queues
    weights: dict[int, int] | None = None
    sched = table("SCHEDULER")
    for k, v in queues.items():
        parts = k.split("|")
        if parts[0] != port or not isinstance(v, dict) or v.get("scheduler") not in sched:
            continue
        s = sched[v["scheduler"]]
        if str(s.get("type", "DWRR")).upper() not in ("DWRR", "WRR"):
            continue
        for q in _qset(parts[-1]):
            weights = weights or {}
            weights[q] = _int(src("SCHEDULER"), f"SCHEDULER|{v['scheduler']}.weight",
                              s.get("weight", 1))
    if weights:
        used.append(f"QUEUE|{port}|*.scheduler, SCHEDULER")
    wd = None
    wdt = table("PFC_WD")
    if port in wdt:
        r = wdt[port]
        wd = {"action": r.get("action", "drop"),
              "detection_ms": _int(src("PFC_WD"), f"PFC_WD|{port}.detection_time",
                                   r.get("detection_time", 200)),
              "restoration_ms": _int(src("PFC_WD"), f"PFC_WD|{port}.restoration_time",
                                     r.get("restoration_time", 200)),
              "poll_ms": _int(src("PFC_WD"), "PFC_WD|GLOBAL.POLL_INTERVAL",
                              wdt.get("GLOBAL", {}).get("POLL_INTERVAL", 200))}
        if wd["action"] == "alert":
            notes.append("PFC_WD action alert: SONiC only reports the storm; no watchdog")
    known = {"PORT_QOS_MAP", "TC_TO_PRIORITY_GROUP_MAP", "BUFFER_POOL", "BUFFER_PROFILE",
             "BUFFER_PG", "CABLE_LENGTH", "PORT", "WRED_PROFILE", "QUEUE", "SCHEDULER",
             "PFC_WD"}
    ignored = sorted(set(doc) - known) + [f"BUFFER_POOL|{k}" for k in sorted(pools)
                                          if k != POOL]
    sw = SonicSwitch(files, port, vendor, lossless, speed_mbps, cable, pool_bytes, pool_mode,
                     shp, prof_name or "", vals.get("size", 0), vals.get("xon", 0),
                     vals["xoff"], vals.get("xon_offset"), dth, vals.get("static_th"), ecn,
                     weights, wd, used, ignored, notes)
    sw.listed_ports = (len(table("PORT")) or len(cables)
                       or len([k for k in qos if k != "global"]))
    return sw


def _qset(text: str) -> list[int]:
    """Queue indices of a key's last part: '3', '3-4', '0-2'."""
    a, _, b = text.partition("-")
    try:
        lo = int(a)
        hi = int(b) if b else lo
    except ValueError:
        return []
    return list(range(lo, hi + 1))


def switch_keys(sw: SonicSwitch, ports: int) -> tuple[dict[str, Any], dict[str, Any],
                                                      list[str]]:
    """The fabric file's ``[switch]`` and ``[ecn]`` keys for switches of ``ports`` ports
    with ``sw``'s settings, and notes on what was approximated."""
    notes: list[str] = []
    n_ll = len(sw.lossless)
    headroom = sw.xoff_bytes
    if sw.shared_headroom_bytes and ports * n_ll * headroom > sw.shared_headroom_bytes:
        headroom = sw.shared_headroom_bytes // (ports * n_ll)
        notes.append(f"shared headroom pool {sw.shared_headroom_bytes} B split over "
                     f"{ports} ports x {n_ll} lossless PGs: {headroom} B each (the profile's "
                     f"xoff {sw.xoff_bytes} B is a PG's most from the shared pool)")
    elif sw.shared_headroom_bytes:
        notes.append(f"shared headroom pool {sw.shared_headroom_bytes} B: each lossless PG "
                     f"its own {headroom} B (the model does not share headroom)")
    reserved = sw.reserved_bytes
    if sw.vendor == "spectrum":  # the pool is the shared part: reserves and headroom besides
        buffer = sw.pool_bytes + ports * (8 * reserved + n_ll * headroom)
    else:
        buffer = sw.pool_bytes
    keys: dict[str, Any] = {
        "pfc": True, "lossless_tcs": list(sw.lossless), "buffer_kb": buffer / 1000,
        "reserved_kb": reserved / 1000, "headroom_kb": headroom / 1000,
        "xon_delta_kb": sw.xon_delta_bytes / 1000,
    }
    if sw.static_th_bytes is not None:
        keys.update(xoff_mode="static", xoff_kb=sw.static_th_bytes / 1000)
    elif sw.alpha is None:  # no limit: XOFF when the pool is full
        shared = buffer - ports * (8 * reserved + n_ll * headroom)
        keys.update(xoff_mode="static", xoff_kb=max(shared, 1) / 1000)
    else:
        keys.update(xoff_mode="dynamic", alpha=str(sw.alpha))
    if sw.weights:
        keys.update(scheduler="dwrr", weights=[sw.weights.get(q, 1) for q in range(8)])
    wd = sw.watchdog
    if wd is not None and wd["action"] in ("drop", "forward"):  # SONiC's, in the model's terms
        poll = max(wd["poll_ms"], 1)
        keys.update(watchdog=True, wd_poll_ms=float(poll),
                    wd_detect_polls=max(1, -(-wd["detection_ms"] // poll)),
                    wd_restore_ms=float(wd["restoration_ms"]), wd_action=wd["action"])
    ecn: dict[str, Any] = {}
    if sw.ecn is not None:
        ecn = {"kmin_kb": sw.ecn["kmin_bytes"] / 1000, "kmax_kb": sw.ecn["kmax_bytes"] / 1000,
               "pmax": sw.ecn["pmax"]}
    else:
        ecn = {"pmax": 0.0}
    return keys, ecn, notes


def sonic_text(sw: SonicSwitch, ports: int | None = None) -> str:
    """The report of ``lossless fabric --sonic``: what was read, the model it makes."""
    out = [f"sonic {', '.join(sw.files)}",
           f"  port {sw.port}: lossless priorities {','.join(map(str, sw.lossless))}"
           + (f", {sw.speed_mbps} Mb/s" if sw.speed_mbps else "")
           + (f", cable {sw.cable}" if sw.cable else ""),
           f"  pool {POOL}: {sw.pool_bytes} B, {sw.pool_mode}"
           + (f", shared headroom {sw.shared_headroom_bytes} B" if sw.shared_headroom_bytes
              else ""),
           f"  lossless PG profile {sw.profile}: size {sw.size_bytes}, xon {sw.xon_bytes}, "
           f"xoff {sw.xoff_bytes}"
           + (f", xon_offset {sw.xon_offset_bytes}" if sw.xon_offset_bytes is not None else "")
           + (f", dynamic_th {sw.dynamic_th}" if sw.dynamic_th is not None else "")
           + (f", static_th {sw.static_th_bytes}" if sw.static_th_bytes is not None else "")
           + f" ({'Spectrum' if sw.vendor == 'spectrum' else 'Tomahawk'})"]
    if sw.ecn:
        out.append(f"  ECN: {sw.ecn['profile']} on queue {sw.ecn['queue']}: Kmin "
                   f"{sw.ecn['kmin_bytes']} B, Kmax {sw.ecn['kmax_bytes']} B, Pmax "
                   f"{sw.ecn['pmax']:g} ({sw.ecn['mode']})")
    else:
        out.append("  ECN: none on the lossless queues")
    if sw.weights:
        out.append("  DWRR weights: " + ", ".join(f"q{q} {w}" for q, w in
                                                  sorted(sw.weights.items())))
    if sw.watchdog:
        w = sw.watchdog
        out.append(f"  PFC watchdog: {w['action']}, detection {w['detection_ms']} ms, "
                   f"restoration {w['restoration_ms']} ms, poll {w['poll_ms']} ms")
    if ports is not None:
        keys, ecn, notes = switch_keys(sw, ports)
        out.append(f"as the model ({ports}-port switches):")
        out.append("  [switch] " + ", ".join(f"{k} = {_toml(v)}" for k, v in keys.items()))
        out.append("  [ecn] " + ", ".join(f"{k} = {_toml(v)}" for k, v in ecn.items()))
    else:
        notes = []
    out.append("used: " + "; ".join(sw.used))
    if sw.ignored:
        out.append("ignored: " + ", ".join(sw.ignored))
    for n in (*sw.notes, *notes):
        out.append(f"note: {n}")
    return "\n".join(out) + "\n"


def _toml(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, float):
        return f"{v:g}"
    return str(v).replace("'", '"')


def sonic_doc(sw: SonicSwitch, ports: int | None = None) -> dict[str, Any]:
    """The report as JSON: the settings read, and with ``ports`` the model's keys."""
    out: dict[str, Any] = {
        "files": sw.files, "port": sw.port, "vendor": sw.vendor, "lossless": sw.lossless,
        "speed_mbps": sw.speed_mbps, "cable": sw.cable, "pool_bytes": sw.pool_bytes,
        "pool_mode": sw.pool_mode, "shared_headroom_bytes": sw.shared_headroom_bytes,
        "profile": sw.profile, "size_bytes": sw.size_bytes, "xon_bytes": sw.xon_bytes,
        "xoff_bytes": sw.xoff_bytes, "xon_offset_bytes": sw.xon_offset_bytes,
        "dynamic_th": sw.dynamic_th, "static_th_bytes": sw.static_th_bytes, "ecn": sw.ecn,
        "weights": sw.weights, "watchdog": sw.watchdog, "used": sw.used,
        "ignored": sw.ignored, "notes": list(sw.notes)}
    if ports is not None:
        keys, ecn, notes = switch_keys(sw, ports)
        out.update({"switch": keys, "ecn_keys": ecn})
        out["notes"] += notes
    return out


def given_keys(table: Mapping[str, Any]) -> set[str]:
    """The keys a fabric file's table gives itself (they win over the configuration's)."""
    return {k for k in table if not k.startswith("sonic")}
