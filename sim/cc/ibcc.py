"""``ibcc``: the InfiniBand congestion-control reaction point of a channel adapter (IBA Vol. 1,
annex A10; parameter names as OpenSM's ``cc_ca_cong_setting_*`` and ``cc_cct`` options).

Source keys (as in ``docs/explanation/infiniband.md`` "Congestion control (IBA annex A10)"):
``OSM`` OpenSM, github.com/linux-rdma/opensm, ``opensm/osm_subnet.c`` (the option comments:
"ccti timer - when expires decrements 1 from the CCTI", "ccti increase - number to be added to
the table index on receipt of a BECN", "ccti min - the minimum value for the ccti", "cc_cct -
Comma separated list of CCT entries ... shift:multiplier") and
``opensm/osm_congestion_control.c`` (``ccti_limit = entries - 1``; a CCT entry is
``shift << 14 | multiplier``: 2-bit shift, 14-bit multiplier); ``LLNL`` the OpenSM CC study
script ``opensm-cc-conf-gen.rb`` (P. Huang, LLNL), whose ``generate_cct_mellanox_default``
table we use as the default CCT shape.

One instance per flow (the simulator's flow = one QP on one SL, so per-QP and per-SL control
are the same here).  State: the congestion control table index ``ccti``.

* A BECN (:meth:`IbCc.on_cnp`: the NIC's CNP path carries it) does
  ``ccti = min(ccti + ccti_increase, ccti_limit)``.
* The CCTI timer, ``ccti_timer`` units of 1.024 us (IBA A10 CCTI_Timer), runs on a fixed grid
  from time 0: at each expiry ``ccti`` drops by 1, not below ``ccti_min``.  A BECN does not
  restart it [A].  It is kept pending only while ``ccti > ccti_min`` (an expiry there changes
  nothing), the next expiry on the same grid, so this is exactly the always-running timer.
  ``ccti_timer = 0`` stops the timer (CCTI then never decreases).
* Rate: the inter-packet delay is the table entry ``CCT[ccti] = (shift, multiplier)``,
  read as ``IPD = multiplier / 2**shift`` times the packet's own transmission time at line
  rate [A: our reading of A10's shift:multiplier entry; the annex text was not available].
  A delay of IPD packet times after each packet is the same as sending at
  ``rate = line * 2**shift // (2**shift + multiplier)`` (rounded down): the NIC's pacer already
  spaces a flow's frames by their serialisation time at the flow's rate, so the IPD is
  applied as that rate (one mechanism, as DCQCN's rate).  ``CCT[0]`` should be ``(0, 0)``
  (line rate).

Default table (``preset="mellanox"``): 128 entries, ``(0, floor(7 i^2 / (95^2 * 0.218)))``
for ``i = 0..127`` (LLNL ``generate_cct_mellanox_default``): IPD 0 .. 57 packet times,
quadratic in the index.  ``preset="linear"``: 128 entries ``(0, i)`` (stated default of ours).
Other defaults ([A], OpenSM leaves them 0 = unset): ``ccti_increase = 1`` (LLNL's value),
``ccti_min = 0`` (LLNL), ``ccti_timer = 2`` (2.048 us, the smallest LLNL tried; tuned on the
``incast`` built-in, see
the docs), ``ccti_limit`` = last table index (OSM).
"""

from __future__ import annotations

from collections.abc import Sequence

from sim.cc.base import RateControl

__all__ = ["IbCc", "CCTI_TIMER_UNIT_PS", "CCT_PRESETS", "DEFAULT_PRESET", "PARAM_NAMES",
           "SWITCH_PARAMS", "SWITCH_DEFAULTS", "cct_preset", "options_text",
           "split_switch_params"]

#: IBA A10 CCTI_Timer unit: 1.024 us.
CCTI_TIMER_UNIT_PS = 1_024_000

DEFAULT_PRESET = "mellanox"


def _mellanox_default() -> tuple[tuple[int, int], ...]:
    # LLNL opensm-cc-conf-gen.rb generate_cct_mellanox_default: "0:" + int(i*i*7/95**2/0.218)
    return tuple((0, int((i * i * 7) / (1.0 * 95 ** 2) / 0.218)) for i in range(128))


CCT_PRESETS: dict[str, tuple[tuple[int, int], ...]] = {
    "mellanox": _mellanox_default(),
    "linear": tuple((0, i) for i in range(128)),  # [A] ours: IPD = i packet times
}

#: The CA parameters (OpenSM cc_ca_cong_setting_* names without the prefix, and cc_cct).
PARAM_NAMES = ("ccti_increase", "ccti_timer", "ccti_min", "ccti_limit", "cc_cct")
_DEFAULTS: dict[str, object] = {"ccti_increase": 1, "ccti_timer": 2, "ccti_min": 0,
                                "ccti_limit": None, "cc_cct": None}

#: The switch-side parameters (OpenSM cc_sw_cong_setting_* without the prefix) that a
#: scenario's ``cc_opts`` may carry for ``cc = "ibcc"``; the scenario layer gives them to the
#: switches' marking (sim.net.switch.EcnConfig, mode "ib"), not to this class.
SWITCH_PARAMS = ("threshold", "marking_rate", "packet_size")
#: [A] ours (OpenSM's defaults are 0 = CC off): threshold 0xF (most aggressive), a mark on
#: every eligible packet, no minimum size (credits of 64 bytes).
SWITCH_DEFAULTS: dict[str, int] = {"threshold": 15, "marking_rate": 0, "packet_size": 0}


def options_text() -> list[str]:
    """Lines for ``lossless scenarios``: the options ``cc_opts`` takes with ``cc=ibcc``."""
    d = {**_DEFAULTS, "ccti_limit": "last table index", "cc_cct": "the preset's table"}
    return ([f"ibcc options (cc_opts=NAME=VALUE,...; presets = CCT tables: "
             f"{', '.join(CCT_PRESETS)}; IBA annex A10, docs/explanation/infiniband.md):"]
            + [f"  {n:<30} {d[n]}" + ("  (x 1.024 us)" if n == "ccti_timer" else "")
               for n in PARAM_NAMES]
            + [f"  {n:<30} {v}  (switch marking)" for n, v in SWITCH_DEFAULTS.items()])


def cct_preset(name: str | None) -> tuple[tuple[int, int], ...]:
    name = DEFAULT_PRESET if name is None else name
    if name not in CCT_PRESETS:
        raise ValueError(f"unknown ibcc preset {name!r}; presets: {', '.join(CCT_PRESETS)}")
    return CCT_PRESETS[name]


def split_switch_params(params: dict[str, object]) -> tuple[dict[str, object],
                                                            dict[str, int]]:
    """(CA parameters, switch parameters with defaults filled in) of one ``cc_opts`` dict."""
    ca = {k: v for k, v in params.items() if k not in SWITCH_PARAMS}
    sw = dict(SWITCH_DEFAULTS)
    for k in SWITCH_PARAMS:
        if k in params:
            v = params[k]
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"ibcc {k} must be an integer >= 0, got {v!r}")
            sw[k] = v
    if sw["threshold"] > 15:
        raise ValueError(f"ibcc threshold must be 0..15 (4 bits), got {sw['threshold']}")
    if sw["marking_rate"] > 0xFFFF:
        raise ValueError(f"ibcc marking_rate must be 0..65535, got {sw['marking_rate']}")
    if sw["packet_size"] > 255:
        raise ValueError(f"ibcc packet_size must be 0..255 credits, got {sw['packet_size']}")
    return ca, sw


def _int(name: str, v: object, lo: int, hi: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"ibcc {name} must be an integer in {lo}..{hi}, got {v!r}")
    return v


class IbCc(RateControl):
    """IBA A10 reaction point for one flow.  ``IbCc(line_rate_bps=..., preset=None, **opts)``
    with ``opts`` among :data:`PARAM_NAMES`; ``cc_cct`` a sequence of ``(shift, multiplier)``
    (default: the preset's table).  Read-only state: ``ccti``, ``rate_bps``; counters
    ``becns``, ``timer_decrements``."""

    def __init__(self, *, line_rate_bps: int, preset: str | None = None,
                 **overrides: object) -> None:
        if isinstance(line_rate_bps, bool) or not isinstance(line_rate_bps, int) \
                or line_rate_bps <= 0:
            raise ValueError(f"ibcc line_rate_bps must be a positive integer, got "
                             f"{line_rate_bps!r}")
        unknown = sorted(set(overrides) - set(PARAM_NAMES))
        if unknown:
            raise ValueError(f"unknown ibcc parameter(s) {', '.join(unknown)}; valid: "
                             f"{', '.join(PARAM_NAMES)}")
        p = dict(_DEFAULTS)
        p.update(overrides)
        table = cct_preset(preset) if p["cc_cct"] is None else self._table(p["cc_cct"])
        self.preset = DEFAULT_PRESET if preset is None else preset
        self.line_rate_bps = line_rate_bps
        self.cct = table
        limit = len(table) - 1 if p["ccti_limit"] is None else p["ccti_limit"]
        self.ccti_limit = _int("ccti_limit", limit, 0, len(table) - 1)
        self.ccti_increase = _int("ccti_increase", p["ccti_increase"], 0, 255)
        self.ccti_timer = _int("ccti_timer", p["ccti_timer"], 0, 0xFFFF)
        self.ccti_min = _int("ccti_min", p["ccti_min"], 0, self.ccti_limit)
        self._period_ps = self.ccti_timer * CCTI_TIMER_UNIT_PS
        self._rates = tuple(line_rate_bps * (1 << s) // ((1 << s) + m) for s, m in table)
        self._ccti = self.ccti_min
        self._rate = self._rates[self._ccti]
        self._due: int | None = None
        self.reacts_to_tx = False
        self.becns = 0
        self.timer_decrements = 0

    @staticmethod
    def _table(v: object) -> tuple[tuple[int, int], ...]:
        if isinstance(v, (str, bytes)) or not isinstance(v, Sequence) or not v:
            raise ValueError(f"ibcc cc_cct must be a non-empty list of [shift, multiplier], "
                             f"got {v!r}")
        out = []
        for i, e in enumerate(v):
            if isinstance(e, (str, bytes)) or not isinstance(e, Sequence) or len(e) != 2:
                raise ValueError(f"ibcc cc_cct[{i}] must be [shift, multiplier], got {e!r}")
            out.append((_int(f"cc_cct[{i}] shift", e[0], 0, 3),
                        _int(f"cc_cct[{i}] multiplier", e[1], 0, 0x3FFF)))
        if len(out) > 16384:
            raise ValueError(f"ibcc cc_cct has {len(out)} entries; at most 16384")
        return tuple(out)

    # ------------------------------------------------------------------ state
    @property
    def rate_bps(self) -> int:
        return self._rate

    @property
    def ccti(self) -> int:
        return self._ccti

    def ipd(self, index: int | None = None) -> float:
        """The inter-packet delay of table entry ``index`` (default: the current CCTI), in
        packet transmission times at line rate."""
        s, m = self.cct[self._ccti if index is None else index]
        return m / (1 << s)

    def log_data(self) -> dict[str, object]:
        d = super().log_data()
        d.update(ccti=self._ccti, ipd=self.ipd())
        return d

    def __repr__(self) -> str:
        return f"IbCc(preset={self.preset!r}, ccti={self._ccti}, rate_bps={self._rate})"

    # ------------------------------------------------------------------ hooks
    def next_timer_ps(self) -> int | None:
        return self._due

    def on_timer(self, now_ps: int) -> None:
        self._run_due(now_ps)

    def on_cnp(self, now_ps: int) -> None:
        """A BECN for this flow arrived."""
        if self._due is not None and self._due <= now_ps:
            self._run_due(now_ps)
        self.becns += 1
        c = self._ccti + self.ccti_increase
        self._set(c if c < self.ccti_limit else self.ccti_limit)
        if self._due is None and self._period_ps and self._ccti > self.ccti_min:
            t = self._period_ps
            self._due = (now_ps // t + 1) * t  # the next expiry of the grid from time 0

    def _run_due(self, now: int) -> None:
        t = self._period_ps
        while self._due is not None and self._due <= now:
            self.timer_decrements += 1
            self._set(self._ccti - 1)
            self._due = self._due + t if self._ccti > self.ccti_min else None

    def _set(self, ccti: int) -> None:
        self._ccti = ccti
        self._rate = self._rates[ccti]
