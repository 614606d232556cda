"""
The two sizes of a stand-in. `real` has the real config's sizes. `tiny` (tests) keeps every key
and value of the real config but the sizes: 2 layers, hidden 64, 4 heads, the real FFN ratio,
and windows over 1024 tokens cut to 1024 (so a text over the window stays cheap to run). A text
and image model's towers each shrink so; a projection into their shared space is 32 wide (unlike
either tower, so that a mix-up of widths shows), and images keep their real size and patch (the
real number of vision tokens).
"""
TINY_LAYERS, TINY_HIDDEN, TINY_HEADS = 2, 64, 4
TINY_WINDOW = 1024
TINY_PROJECTION = 32


def shrink(config, size, hidden="hidden_size", layers="num_hidden_layers", heads="num_attention_heads",
           intermediate="intermediate_size"):
    """A copy of `config` with the tiny sizes (or the same sizes for `real`)."""
    cfg = dict(config)
    if size == "real":
        return cfg
    ratio = cfg[intermediate] / cfg[hidden] if intermediate else None
    cfg[hidden], cfg[layers], cfg[heads] = TINY_HIDDEN, TINY_LAYERS, TINY_HEADS
    if intermediate:
        cfg[intermediate] = int(TINY_HIDDEN * ratio)
    return cfg


def window(real_window, size):
    return real_window if size == "real" else min(real_window, TINY_WINDOW)


def matryoshka(dims, real_hidden, hidden):
    """The real model's Matryoshka widths, scaled to a tiny model's width."""
    return list(dims) if hidden == real_hidden else sorted({max(1, d * hidden // real_hidden) for d in dims}, reverse=True)
