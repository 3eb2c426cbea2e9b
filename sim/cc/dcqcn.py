"""``dcqcn``: the DCQCN reaction point (RP, the sender NIC's per-QP rate limiter).

One class, :class:`Dcqcn`, covers both published flavours; ``variant`` selects the skeleton and
every other place where implementations disagree is its own named option (see
:func:`parameters` and ``docs/explanation/dcqcn.md``).  Source keys below (as in that page):
``DCQCN`` Zhu et al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM 2015,
doi:10.1145/2785956.2787484 (Sec. 3: the RP); ``NVDOC`` NVIDIA "DCQCN CC Parameters" (DOCA
documentation) and the Mellanox community page "DCQCN Parameters" (DOC-2790); ``HPCC``
github.com/alibaba-edu/High-Precision-Congestion-Control (``simulation/run.py``, ``mix/config.txt``,
``rdma-hw.cc``); ``NS3RDMA`` github.com/bobzhuyb/ns3-rdma (``qbb-net-device.cc``); ``ISEKAI``
Google's isekai RoCE model (``isekai/host/rdma/rdma_roce_cc_dcqcn.{h,cc}``); ``DCB`` the ns-3
"dcb" module by Pavinberg (``src/dcb/model/``); ``FLUIDCODE`` public ports of the ECNDELAY fluid
model (github.com/lzhtan/Fluid-Model-for-DCQCN-ECN-PFC, github.com/lirong-lirong/dcqcn-fluid-model).

``variant="paper"`` (DCQCN Sec. 3 / NS3RDMA ``qbb-net-device.cc``)
    Every CNP cuts at once: ``Rt = Rc`` (see ``clamp_target_rate``), ``Rc *= 1 - alpha/2`` and
    ``alpha = (1-g)*alpha + g`` (order: ``alpha_update_order``); the counters are reset and the
    rate-increase timer (``rate_increase_period_ps``, T) and the alpha timer
    (``alpha_period_ps``, K) restart.  The alpha timer decays ``alpha *= 1-g`` every K without a
    CNP.
``variant="vendor"`` (NVIDIA ConnectX firmware as modelled by HPCC ``rdma-hw.cc`` "mlx" and ISEKAI)
    A CNP only sets flags.  The first CNP of the QP sets ``alpha = alpha_init`` and
    ``Rt = Rc = rate_on_first_cnp_fraction * Rc`` and starts two clocks: the alpha tick every
    ``alpha_period_ps`` (``alpha = (1-g)*alpha + g`` if a CNP arrived since the previous tick,
    else ``(1-g)*alpha``; the first CNP itself does not count) and the decrease tick every
    ``rate_reduce_monitor_period_ps`` (one cut if any CNP arrived in the period, then the
    increase timer restarts).

Rate increase (both variants): each expiry of the increase timer bumps the timer counter
``T_cnt``; every ``byte_counter_bytes`` sent bump the byte counter ``BC`` (0 = no byte counter,
as in HPCC).  Each such event runs fast recovery (``Rc = (Rt+Rc)/2``), additive increase
(``Rt += rate_ai_bps`` first) or hyper increase (``Rt += i * rate_hai_bps``); which one is
decided by ``increase_stage_rule`` and ``fast_recovery_stages`` (F) and ``i`` by
``hyper_increase_multiplier``.  ``Rt`` is clamped to the line rate before the average.

Integer rules (ours): rates are whole bps.  A cut rounds down (then ``min_rate_bps`` applies);
the recovery average ``(Rt+Rc)/2`` rounds up, so ``Rc`` reaches ``Rt`` in finitely many steps
(HPCC/NS3RDMA average with ``Rc/2 + Rt/2`` in their DataRate type; ours differs by at most 1 bps).
``alpha`` is a float kept in [0, 1].

Timers: :meth:`Dcqcn.next_timer_ps` is the earliest of the alpha timer/tick, the decrease tick
and the increase timer; :meth:`Dcqcn.on_timer` runs every one due at or before ``now_ps`` in time
order, ties in the order alpha, decrease, increase (HPCC gets alpha-before-decrease from a 1 ns
offset on the decrease tick; we get it from the tie order, with the decrease ticks exactly on the
``rate_reduce_monitor_period_ps`` grid).  ``on_cnp`` and ``on_tx`` first run the timers due at or
before their ``now_ps``, so the result does not depend on the order in which an engine delivers
events with the same timestamp.

Cost: before the first CNP nothing is pending and ``reacts_to_tx`` is False.  Timers whose
expiry cannot change ``(rate, target, alpha)`` are not kept pending; each is exactly equivalent
to the always-running timer of the references: the increase timer and byte counter stop while
``Rc == Rt == line rate``; the alpha timer stops at ``alpha == 0.0`` (with no CNP flag); the
vendor decrease tick is pending only while a CNP waits for it (ticks resume on the original
grid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from numbers import Real
from types import MappingProxyType

from sim.cc.base import RateControl

__all__ = [
    "Dcqcn", "ScaledRate", "ParamInfo", "PRESETS", "DEFAULT_PRESET", "VARIANTS",
    "STAGE_RULES", "HYPER_MULTIPLIERS", "ALPHA_ORDERS", "presets", "preset_params",
    "parameters", "parameter_names",
]

US = 1_000_000  # picoseconds per microsecond
MBPS = 1_000_000  # bps per Mb/s

VARIANTS = ("paper", "vendor")
#: increase_stage_rule -> (ai_from - F, hai_from - F): with the counters counted *including* the
#: current event, the event is fast recovery while max(counters) < F + ai_off, additive while
#: min(counters) < F + hai_off, hyper otherwise (only enabled counters take part).
STAGE_RULES: dict[str, tuple[int, int]] = {
    "paper": (0, 0),    # DCQCN Sec. 3 / NS3RDMA pseudo-code: F-1 fast-recovery steps
    "ns3rdma": (0, 0),  # NS3RDMA rpr_fast_time/rpr_active_select: same boundaries as "paper"
    "dcb": (1, 1),      # DCB module ("> F" test): F fast-recovery steps
    "isekai": (0, 1),   # ISEKAI: AI when max >= F, HAI when min > F
    "hpcc": (1, 2),     # HPCC RateIncEventMlx: stage<F FR, stage==F AI (once), stage>F HAI
}
#: hyper_increase_multiplier -> i for the hyper step, m = min(counters), h = F + hai_off:
#: "paper" i = m - h (0 on the first hyper event, DCQCN Sec. 3), "ns3rdma" i = m - h + 1
#: (rpr_hyper_increase "- m_rpgThreshold + 1"), "constant" i = 1 (HPCC/NVIDIA).
HYPER_MULTIPLIERS = ("paper", "ns3rdma", "constant")
ALPHA_ORDERS = ("cut_then_update", "update_then_cut")

_FR, _AI, _HAI = 0, 1, 2
_INT64_LIMIT = 2**63


@dataclass(frozen=True)
class ScaledRate:
    """A rate given at a reference line rate, scaled linearly: ``bps * line / ref_line``
    (rounded down).  HPCC ``run.py`` writes R_AI/R_HAI as ``5*bw/25`` / ``50*bw/25`` Mb/s."""

    bps: int
    ref_line_rate_bps: int

    def at(self, line_rate_bps: int) -> int:
        return self.bps * line_rate_bps // self.ref_line_rate_bps

    def __str__(self) -> str:
        return (f"{self.bps / MBPS:g} Mb/s x line/{self.ref_line_rate_bps / 1e9:g} Gb/s")


@dataclass(frozen=True)
class ParamInfo:
    """One option: name (carries its unit), unit, kind, doc, and value per preset."""

    name: str
    unit: str
    doc: str
    defaults: dict[str, object] = field(default_factory=dict)

    @property
    def default(self) -> object:
        return self.defaults[DEFAULT_PRESET]


# (name, unit, doc).  Order = documentation order.
_PARAM_DOCS: tuple[tuple[str, str, str], ...] = (
    ("variant", "-", "'paper' (cut on every CNP, alpha timer K restarted by CNPs) or 'vendor' "
     "(alpha clocked every alpha_period_ps, at most one cut per "
     "rate_reduce_monitor_period_ps, first-CNP handling)"),
    ("g", "1", "alpha EWMA gain, 0 < g <= 1"),
    ("alpha_init", "1", "alpha before the first CNP; the vendor variant (re)sets alpha to it on "
     "the first CNP (HPCC: 1; NVIDIA initial_alpha_value 1023/1024)"),
    ("alpha_period_ps", "ps", "paper: K, alpha decays every K without a CNP (restarted by "
     "each CNP); vendor: the alpha update clock (dce_tcp_rtt)"),
    ("alpha_update_order", "-", "paper variant only: 'cut_then_update' (DCQCN: cut with the "
     "old alpha) or 'update_then_cut' (NS3RDMA rpr_cnm_received)"),
    ("rate_reduce_monitor_period_ps", "ps", "vendor variant only: at most one cut per period, "
     "if any CNP arrived in it (the paper variant cuts on every CNP)"),
    ("rate_on_first_cnp_fraction", "1", "on the QP's first CNP, Rt = Rc = fraction * Rc "
     "(HPCC RateOnFirstCnp; 1.0 = no change), 0 < f <= 1"),
    ("clamp_target_rate", "bool", "True: every cut sets Rt = Rc (DCQCN); False: only if a "
     "timer increase happened since the last cut (NVIDIA clamp_tgt_rate=0 with "
     "clamp_tgt_rate_after_time_inc=1; HPCC m_EcnClampTgtRate=false)"),
    ("max_cut_fraction", "1", "largest fraction of Rc one cut may remove (NVIDIA min_dec_fac "
     "50% -> 0.5); the cut is min(alpha/2, max_cut_fraction), 0 < f <= 1"),
    ("rate_increase_period_ps", "ps", "T, the rate-increase timer (rpg_time_reset)"),
    ("byte_counter_bytes", "bytes", "B, one increase event per B bytes sent (rpg_byte_reset); "
     "0 = no byte counter (HPCC)"),
    ("fast_recovery_stages", "events", "F (rpg_threshold); see increase_stage_rule"),
    ("increase_stage_rule", "-", "where fast recovery / additive / hyper increase start: "
     "'paper'/'ns3rdma' (FR while max<F, AI while min<F), 'dcb' (FR while max<=F, AI while "
     "min<=F), 'isekai' (FR while max<F, AI while min<=F), 'hpcc' (FR while max<=F, AI while "
     "min<=F+1: with the timer alone F FR steps, one AI step, then HAI); max/min over the "
     "enabled counters T_cnt, BC, each including the current event"),
    ("hyper_increase_multiplier", "-", "hyper step i*rate_hai_bps: 'paper' i = min - start "
     "(0 on the first hyper event), 'ns3rdma' i = min - start + 1, 'constant' i = 1"),
    ("rate_ai_bps", "bps", "R_AI, additive-increase step (rpg_ai_rate)"),
    ("rate_hai_bps", "bps", "R_HAI, hyper-increase step (rpg_hai_rate)"),
    ("min_rate_bps", "bps", "floor of Rc (rpg_min_rate), 0 < min <= line rate"),
    ("hyper_halves_period", "bool", "NS3RDMA QCN-ism: after an event handled in the hyper "
     "stage, that counter's next period is T/2 (timer) or B/2 (bytes)"),
    ("target_div8_rule", "bool", "NS3RDMA QCN-ism (bobzhuyb/ns3-rdma issue #40): while a "
     "counter equals 1 after a cut, an increase event with Rt > 10*Rc does Rt //= 8 instead "
     "of its increase"),
)

PARAM_NAMES: tuple[str, ...] = tuple(n for n, _, _ in _PARAM_DOCS)

DEFAULT_PRESET = "paper"

# Presets.  Every constant carries its source key (module docstring; docs/explanation/dcqcn.md).
_PRESETS: dict[str, dict[str, object]] = {
    # DCQCN paper (SIGCOMM 2015) constants, as in the FLUIDCODE parameter block.
    "paper": {
        "variant": "paper",
        "g": 1 / 256,                          # DCQCN g = 1/256
        "alpha_init": 1.0,                     # DCQCN initial alpha 1 (recalled, not re-checked)
        "alpha_period_ps": 55 * US,            # DCQCN K = 55 us
        "alpha_update_order": "cut_then_update",  # DCQCN: cut with old alpha, then update
        # Unused by the paper variant (it cuts on every CNP; the paper's moderation is the NP's
        # N = 50 us).  Kept at N so that switching to variant="vendor" is not absurd.
        "rate_reduce_monitor_period_ps": 50 * US,
        "rate_on_first_cnp_fraction": 1.0,     # DCQCN: no first-CNP special case
        "clamp_target_rate": True,             # DCQCN: Rt = Rc on every cut ("always")
        "max_cut_fraction": 0.5,               # DCQCN: cut is alpha/2 <= 1/2 (no extra limit)
        "rate_increase_period_ps": 55 * US,    # DCQCN T = 55 us
        "byte_counter_bytes": 10_000_000,      # DCQCN B = 10 MB (read as 10^7 bytes)
        "fast_recovery_stages": 5,             # DCQCN F = 5
        "increase_stage_rule": "paper",        # DCQCN Sec. 3 (max < F -> FR)
        "hyper_increase_multiplier": "paper",  # DCQCN Sec. 3: i = min(T_cnt, BC) - F
        "rate_ai_bps": 40 * MBPS,              # DCQCN R_AI = 40 Mb/s (given at C = 40 Gb/s)
        # DCQCN does not fix R_HAI in what we could check; we use the NS3RDMA
        # sample config value 200 Mb/s (= 5 x R_AI).
        "rate_hai_bps": 200 * MBPS,
        # DCQCN has no minimum rate; we use NVDOC rpg_min_rate = 1 Mb/s so Rc stays positive.
        "min_rate_bps": 1 * MBPS,
        "hyper_halves_period": False,          # NS3RDMA QCN-ism, off by default
        "target_div8_rule": False,             # NS3RDMA QCN-ism, off by default
    },
    # NVIDIA ConnectX-4+ firmware defaults (NVDOC, an mlxconfig -q dump, ISEKAI header).
    "nvidia": {
        "variant": "vendor",
        "g": 5 / 1024,                         # NVDOC dce_tcp_g = 1019 -> gain (1024-1019)/1024
        "alpha_init": 1023 / 1024,             # NVDOC initial_alpha_value = 1023 (/1024)
        "alpha_period_ps": 1 * US,             # NVDOC dce_tcp_rtt = 1 us
        "alpha_update_order": "cut_then_update",  # unused by the vendor variant
        "rate_reduce_monitor_period_ps": 4 * US,  # NVDOC rate_reduce_monitor_period = 4 us
        "rate_on_first_cnp_fraction": 1.0,     # NVDOC rate_to_set_on_first_cnp = 0 (= line rate)
        "clamp_target_rate": False,            # NVDOC clamp_tgt_rate = 0, ..._after_time_inc = 1
        "max_cut_fraction": 0.5,               # NVDOC min_dec_fac = 50 (%)
        "rate_increase_period_ps": 300 * US,   # NVDOC rpg_time_reset = 300 us
        "byte_counter_bytes": 32767 * 64,      # NVDOC rpg_byte_reset = 32767 (x 64 B, ISEKAI)
        "fast_recovery_stages": 1,             # NVDOC rpg_threshold = 1
        "increase_stage_rule": "isekai",       # ISEKAI: AI when max >= F, HAI when min > F
        "hyper_increase_multiplier": "constant",  # NVDOC rpg_hai_rate is a constant step
        "rate_ai_bps": 5 * MBPS,               # NVDOC rpg_ai_rate = 5 Mb/s (absolute)
        "rate_hai_bps": 50 * MBPS,             # NVDOC rpg_hai_rate = 50 Mb/s (absolute)
        "min_rate_bps": 1 * MBPS,              # NVDOC rpg_min_rate = 1 Mb/s
        "hyper_halves_period": False,
        "target_div8_rule": False,
    },
    # HPCC repo `simulation/run.py --cc dcqcn` (rates scaled by the link bandwidth in Gb/s).
    "hpcc": {
        "variant": "vendor",
        "g": 1 / 256,                          # HPCC run.py/config EWMA_GAIN 1/256
        "alpha_init": 1.0,                     # HPCC rdma-hw.cc: alpha = 1 on the first CNP
        "alpha_period_ps": 1 * US,             # HPCC ALPHA_RESUME_INTERVAL 1 us
        "alpha_update_order": "cut_then_update",  # unused by the vendor variant
        "rate_reduce_monitor_period_ps": 4 * US,  # HPCC RATE_DECREASE_INTERVAL 4 us
        "rate_on_first_cnp_fraction": 1.0,     # HPCC rdma-hw.cc RateOnFirstCnp 1.0
        "clamp_target_rate": False,            # HPCC CLAMP_TARGET_RATE 0
        "max_cut_fraction": 0.5,               # HPCC: alpha/2 only
        "rate_increase_period_ps": 300 * US,   # HPCC run.py --cc dcqcn RP_TIMER 300 us
        "byte_counter_bytes": 0,               # HPCC: no byte counter (timer only)
        "fast_recovery_stages": 1,             # HPCC FAST_RECOVERY_TIMES 1
        "increase_stage_rule": "hpcc",         # HPCC RateIncEventMlx stage test
        "hyper_increase_multiplier": "constant",  # HPCC HyperIncreaseMlx: Rt += R_HAI
        "rate_ai_bps": ScaledRate(5 * MBPS, 25_000_000_000),    # HPCC run.py RATE_AI 5*bw/25 Mb/s
        "rate_hai_bps": ScaledRate(50 * MBPS, 25_000_000_000),  # HPCC run.py RATE_HAI 50*bw/25 Mb/s
        "min_rate_bps": 1000 * MBPS,           # HPCC run.py MIN_RATE 1000 Mb/s (not scaled)
        "hyper_halves_period": False,
        "target_div8_rule": False,
    },
}

PRESETS = MappingProxyType({k: MappingProxyType(v) for k, v in _PRESETS.items()})


def presets() -> dict[str, dict[str, object]]:
    """Preset name -> parameter values (a copy).  :class:`ScaledRate` values depend on the line
    rate; :func:`preset_params` resolves them."""
    return {k: dict(v) for k, v in _PRESETS.items()}


def preset_params(name: str | None, line_rate_bps: int) -> dict[str, object]:
    """The parameter values of preset ``name`` (None = :data:`DEFAULT_PRESET`) at a line rate."""
    name = DEFAULT_PRESET if name is None else name
    if name not in _PRESETS:
        raise ValueError(f"unknown dcqcn preset {name!r}; presets: {', '.join(sorted(_PRESETS))}")
    return {k: (v.at(line_rate_bps) if isinstance(v, ScaledRate) else v)
            for k, v in _PRESETS[name].items()}


def parameters() -> list[ParamInfo]:
    """Every option: name, unit, doc and value per preset (for docs and ``lossless scenarios``)."""
    return [ParamInfo(n, u, d, {p: _PRESETS[p][n] for p in _PRESETS}) for n, u, d in _PARAM_DOCS]


def parameter_names() -> list[str]:
    return list(PARAM_NAMES)


# ----------------------------------------------------------------------------- validation
def _as_int(name: str, v: object) -> int:
    if isinstance(v, bool) or not isinstance(v, Real):
        raise ValueError(f"dcqcn {name} must be an integer, got {v!r}")
    if not isinstance(v, int):
        f = float(v)
        if not math.isfinite(f) or not f.is_integer():
            raise ValueError(f"dcqcn {name} must be an integer, got {v!r}")
        v = int(f)
    if not -_INT64_LIMIT <= v < _INT64_LIMIT:  # the compiled core keeps them as int64
        raise ValueError(f"dcqcn {name} must be below 2**63 in magnitude, got {v!r}")
    return v


def _as_float(name: str, v: object) -> float:
    if isinstance(v, bool) or not isinstance(v, Real):
        raise ValueError(f"dcqcn {name} must be a number, got {v!r}")
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"dcqcn {name} must be finite, got {v!r}")
    return f


def _as_bool(name: str, v: object) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"dcqcn {name} must be True or False, got {v!r}")
    return v


def _as_choice(name: str, v: object, choices) -> str:
    if v not in choices:
        raise ValueError(f"dcqcn {name} must be one of {', '.join(choices)}; got {v!r}")
    return v  # type: ignore[return-value]


# ----------------------------------------------------------------------------- the algorithm
class Dcqcn(RateControl):
    """DCQCN reaction point for one QP.  ``Dcqcn(line_rate_bps=..., preset=None, **overrides)``.

    ``preset`` is one of :data:`PRESETS` (None = ``"paper"``); ``overrides`` are any of
    :func:`parameter_names`.  Read-only state: ``rate_bps`` (Rc), ``target_rate_bps`` (Rt),
    ``alpha``; also ``cnps``, ``cuts``, ``timer_count`` (T_cnt), ``byte_count`` (BC).
    """

    def __init__(self, *, line_rate_bps: int, preset: str | None = None,
                 **overrides: object) -> None:
        line = _as_int("line_rate_bps", line_rate_bps)
        if line <= 0:
            raise ValueError(f"dcqcn line_rate_bps must be positive, got {line_rate_bps!r}")
        unknown = sorted(set(overrides) - set(PARAM_NAMES))
        if unknown:
            raise ValueError(f"unknown dcqcn parameter(s) {', '.join(unknown)}; valid: "
                             f"{', '.join(PARAM_NAMES)}")
        p = preset_params(preset, line)
        p.update(overrides)
        self.preset = DEFAULT_PRESET if preset is None else preset
        self.line_rate_bps = line
        self.variant = _as_choice("variant", p["variant"], VARIANTS)
        self._vendor = self.variant == "vendor"
        g = self.g = _as_float("g", p["g"])
        if not 0.0 < g <= 1.0:
            raise ValueError(f"dcqcn g must be in (0, 1], got {p['g']!r}")
        self.alpha_init = _as_float("alpha_init", p["alpha_init"])
        if not 0.0 <= self.alpha_init <= 1.0:
            raise ValueError(f"dcqcn alpha_init must be in [0, 1], got {p['alpha_init']!r}")
        for name in ("alpha_period_ps", "rate_reduce_monitor_period_ps",
                     "rate_increase_period_ps"):
            v = _as_int(name, p[name])
            if v <= 0:
                raise ValueError(f"dcqcn {name} must be positive, got {p[name]!r}")
            setattr(self, name, v)
        self.alpha_update_order = _as_choice("alpha_update_order", p["alpha_update_order"],
                                             ALPHA_ORDERS)
        for name in ("rate_on_first_cnp_fraction", "max_cut_fraction"):
            v = _as_float(name, p[name])
            if not 0.0 < v <= 1.0:
                raise ValueError(f"dcqcn {name} must be in (0, 1], got {p[name]!r}")
            setattr(self, name, v)
        self.clamp_target_rate = _as_bool("clamp_target_rate", p["clamp_target_rate"])
        self.hyper_halves_period = _as_bool("hyper_halves_period", p["hyper_halves_period"])
        self.target_div8_rule = _as_bool("target_div8_rule", p["target_div8_rule"])
        for name in ("byte_counter_bytes", "fast_recovery_stages", "rate_ai_bps",
                     "rate_hai_bps"):
            v = _as_int(name, p[name])
            if v < 0:
                raise ValueError(f"dcqcn {name} must be >= 0, got {p[name]!r}")
            setattr(self, name, v)
        self.min_rate_bps = _as_int("min_rate_bps", p["min_rate_bps"])
        if self.min_rate_bps <= 0:
            raise ValueError(f"dcqcn min_rate_bps must be positive, got {p['min_rate_bps']!r}")
        if self.min_rate_bps > line:
            raise ValueError(f"dcqcn min_rate_bps ({self.min_rate_bps}) exceeds "
                             f"line_rate_bps ({line})")
        self.increase_stage_rule = _as_choice("increase_stage_rule", p["increase_stage_rule"],
                                              tuple(STAGE_RULES))
        self.hyper_increase_multiplier = _as_choice(
            "hyper_increase_multiplier", p["hyper_increase_multiplier"], HYPER_MULTIPLIERS)
        ai_off, hai_off = STAGE_RULES[self.increase_stage_rule]
        self._ai_from = self.fast_recovery_stages + ai_off
        self._hai_from = self.fast_recovery_stages + hai_off
        self._cut_floor = 1.0 - self.max_cut_fraction  # smallest multiplier a cut may apply

        # state
        self._rc = line
        self._rt = line
        self._alpha = self.alpha_init
        self._first_cnp = True
        self._alpha_flag = False       # vendor: a CNP arrived since the last alpha tick
        self._dec_flag = False         # vendor: a CNP arrived since the last decrease tick
        self._clock0_ps = 0            # vendor: the grid origin (time of the first CNP)
        self._alpha_due: int | None = None
        self._dec_due: int | None = None
        self._inc_due: int | None = None
        self._next_due: int | None = None
        self._t_cnt = 0
        self._bc_cnt = 0
        self._bytes = 0
        self._byte_threshold = self.byte_counter_bytes
        self._phase = _FR
        self.reacts_to_tx = False      # instance attribute, read by the host per call
        self.cnps = 0
        self.cuts = 0

    # ------------------------------------------------------------------ read-only state
    @property
    def rate_bps(self) -> int:
        return self._rc

    @property
    def target_rate_bps(self) -> int:
        return self._rt

    @property
    def alpha(self) -> float:
        return self._alpha

    @property
    def timer_count(self) -> int:
        return self._t_cnt

    @property
    def byte_count(self) -> int:
        return self._bc_cnt

    def log_data(self) -> dict[str, object]:
        d = super().log_data()
        d.update(timer_count=self._t_cnt, byte_count=self._bc_cnt, phase=self._phase)
        return d

    def __repr__(self) -> str:
        return (f"Dcqcn(preset={self.preset!r}, variant={self.variant!r}, rate_bps={self._rc}, "
                f"target_rate_bps={self._rt}, alpha={self._alpha!r})")

    # ------------------------------------------------------------------ hooks
    def next_timer_ps(self) -> int | None:
        return self._next_due

    def on_timer(self, now_ps: int) -> None:
        self._run_due(now_ps)

    def on_cnp(self, now_ps: int) -> None:
        if self._next_due is not None and self._next_due <= now_ps:
            self._run_due(now_ps)
        self.cnps += 1
        if self._vendor:
            self._vendor_cnp(now_ps)
        else:
            self._paper_cnp(now_ps)
        self._refresh_due()

    def on_tx(self, nbytes: int, now_ps: int) -> None:
        if self._next_due is not None and self._next_due <= now_ps:
            self._run_due(now_ps)
        if not self.reacts_to_tx:
            return
        b = self._bytes + nbytes
        if b < self._byte_threshold:
            self._bytes = b
            return
        self._bytes = 0  # DCQCN / NS3RDMA: "if bytes >= B: bytes = 0" (the excess is not carried)
        self._bc_cnt += 1
        halve = self.hyper_halves_period and self._phase == _HAI
        self._byte_threshold = (self.byte_counter_bytes // 2 or 1) if halve \
            else self.byte_counter_bytes
        self._increase()
        self._refresh_due()

    # ------------------------------------------------------------------ CNP handling
    def _paper_cnp(self, now: int) -> None:
        if self._first_cnp:
            self._first_cnp = False
            self._set_first_cnp_rate()
        if self.alpha_update_order == "update_then_cut":
            self._alpha_up()
            self._cut(now)
        else:
            self._cut(now)
            self._alpha_up()
        self._alpha_due = now + self.alpha_period_ps  # K restarts on every CNP

    def _vendor_cnp(self, now: int) -> None:
        self._dec_flag = True
        if self._first_cnp:
            self._first_cnp = False
            self._alpha = self.alpha_init
            self._alpha_flag = False  # the first CNP does not count toward alpha (HPCC)
            self._set_first_cnp_rate()
            self._clock0_ps = now
            self._alpha_due = now + self.alpha_period_ps
            self._dec_due = now + self.rate_reduce_monitor_period_ps
            return
        self._alpha_flag = True
        if self._alpha_due is None:
            self._alpha_due = self._next_grid(now, self.alpha_period_ps)
        if self._dec_due is None:
            self._dec_due = self._next_grid(now, self.rate_reduce_monitor_period_ps)

    def _next_grid(self, now: int, period: int) -> int:
        """The first tick of the clock started at the first CNP strictly after ``now``."""
        return self._clock0_ps + ((now - self._clock0_ps) // period + 1) * period

    def _set_first_cnp_rate(self) -> None:
        if self.rate_on_first_cnp_fraction != 1.0:
            r = max(self.min_rate_bps, int(self._rc * self.rate_on_first_cnp_fraction))
            self._rc = self._rt = r

    def _alpha_up(self) -> None:
        a = (1.0 - self.g) * self._alpha + self.g
        self._alpha = 1.0 if a > 1.0 else a

    def _cut(self, now: int) -> None:
        if self.clamp_target_rate or self._t_cnt > 0:
            self._rt = self._rc
        factor = 1.0 - self._alpha / 2.0
        if factor < self._cut_floor:
            factor = self._cut_floor
        rc = int(self._rc * factor)
        self._rc = rc if rc > self.min_rate_bps else self.min_rate_bps
        self.cuts += 1
        self._t_cnt = self._bc_cnt = 0
        self._bytes = 0
        self._byte_threshold = self.byte_counter_bytes
        self._phase = _FR
        self._inc_due = now + self.rate_increase_period_ps
        self.reacts_to_tx = self.byte_counter_bytes > 0

    # ------------------------------------------------------------------ increase
    def _increase(self) -> None:
        t, b = self._t_cnt, self._bc_cnt
        if self.byte_counter_bytes > 0:
            mx, mn = (t, b) if t >= b else (b, t)
        else:
            mx = mn = t
        if mx < self._ai_from:
            phase, step = _FR, 0
        elif mn < self._hai_from:
            phase, step = _AI, self.rate_ai_bps
        else:
            phase = _HAI
            m = self.hyper_increase_multiplier
            i = 1 if m == "constant" else mn - self._hai_from + (1 if m == "ns3rdma" else 0)
            step = i * self.rate_hai_bps
        rt = self._rt
        if self.target_div8_rule and (t == 1 or b == 1) and rt > 10 * self._rc:
            rt //= 8  # NS3RDMA AdjustRates: instead of the increase
        else:
            rt += step
        if rt > self.line_rate_bps:
            rt = self.line_rate_bps
        self._rt = rt
        self._rc = (rt + self._rc + 1) // 2
        self._phase = phase
        if self._rc == rt == self.line_rate_bps:
            # Recovered: further increase events cannot change Rc or Rt, and the counters only
            # matter after the next cut, which resets them.  Stop the timer and byte counter.
            self._inc_due = None
            self.reacts_to_tx = False

    # ------------------------------------------------------------------ timers
    def _refresh_due(self) -> None:
        due = self._alpha_due
        for d in (self._dec_due, self._inc_due):
            if d is not None and (due is None or d < due):
                due = d
        self._next_due = due

    def _run_due(self, now: int) -> None:
        """Run every timer due at or before ``now`` in time order (ties: alpha, dec, inc)."""
        while True:
            a, d, i = self._alpha_due, self._dec_due, self._inc_due
            t = a
            for x in (d, i):
                if x is not None and (t is None or x < t):
                    t = x
            if t is None or t > now:
                break
            if a == t:
                self._alpha_timer(t)
            elif d == t:
                self._dec_timer(t)
            else:
                self._inc_timer(t)
        self._refresh_due()

    def _alpha_timer(self, t: int) -> None:
        a = (1.0 - self.g) * self._alpha
        if self._alpha_flag:  # vendor only
            a += self.g
            self._alpha_flag = False
            if a > 1.0:
                a = 1.0
        self._alpha = a
        self._alpha_due = t + self.alpha_period_ps if a > 0.0 else None

    def _dec_timer(self, t: int) -> None:
        self._dec_due = None  # pending again only when a CNP sets the flag (same grid)
        if self._dec_flag:
            self._dec_flag = False
            self._cut(t)

    def _inc_timer(self, t: int) -> None:
        halve = self.hyper_halves_period and self._phase == _HAI
        self._inc_due = t + ((self.rate_increase_period_ps // 2 or 1) if halve
                             else self.rate_increase_period_ps)
        self._t_cnt += 1
        self._increase()  # may clear _inc_due when recovered
