"""One colour per strategy and per collective algorithm, for every figure
that reports/regenerate and reports/plan_figure draw.

A strategy has the same colour in every figure, so that a reader who has
found zero3 in one figure finds it in the next without the legend. Each
family shares a hue and its variants take shades of it (ZeRO stages blues,
FSDP greens, PaRO reds), so that a family reads as one. Standard library
only: both scripts import it from their own folder.
"""

# The strategies of docs/strategies.md and the algorithms of
# sim/schema/strategy.proto's Algorithm (by their --algorithm names). The
# one mapping: every figure looks its colours up here through color().
COLORS = {
    # Strategies.
    "ddp": "#8c564b",
    "zero1": "#9ecae1",
    "zero2": "#4292c6",
    "zero3": "#08519c",
    "fsdp": "#31a354",  # FULL_SHARD, FSDP's default
    "fsdp:FULL_SHARD": "#31a354",
    "fsdp:SHARD_GRAD_OP": "#74c476",
    "fsdp:HYBRID_SHARD": "#006d2c",
    "fsdp:_HYBRID_SHARD_ZERO2": "#a1d99b",
    "mics": "#ff7f0e",
    "zeropp": "#9467bd",
    "paro": "#d62728",  # a PaRO code other than the three named below
    "paro-IGG": "#fc9272",
    "paro-IIG": "#de2d26",
    "paro-NIG": "#67000d",
    "lins": "#17becf",
    # Collective algorithms: greys and earth tones, apart from the
    # strategies' hues.
    "ring": "#525252",
    "hring": "#969696",
    "horing": "#bcbd22",
    "torus2d": "#8c6d31",
    "tree": "#7b4173",
    "direct": "#393b79",
    "sharp": "#637939",
}

# What is not a value: a point that ran out of memory is drawn in this grey
# and hatch, never in its strategy's colour.
OOM_COLOR = "0.55"
OOM_HATCH = "///"


def key(name):
    """The COLORS key of a strategy or algorithm name, or None.

    Tries the name itself, then without its algorithm choice ("zero3@both=
    horing" is zero3) and without its options ("mics:shard_size=8" is mics,
    "lins:p=1x1:g=1x1:os=8x1" is lins), then its family ("paro-NNG" is
    paro). Algorithm names are looked up in lower case ("RING" is ring).
    """
    name = name.split(" [")[0].split("@")[0]
    for k in (name, name.lower(), name.split(":")[0],
              name.split("-")[0] if name.startswith("paro-") else None):
        if k in COLORS:
            return k
    return None


def color(name):
    """The colour of a strategy or algorithm; a ValueError naming it when
    the mapping has none, so that no figure silently invents one."""
    k = key(name)
    if k is None:
        raise ValueError("reports/palette.py: no colour for %r: add it to "
                         "COLORS" % name)
    return COLORS[k]
