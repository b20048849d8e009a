"""Config helpers shared by the reference models: the same per-stage rules as models/model_config.c."""


def per_stage(cfg, key, default):
    """A per-stage list from a scalar or a list (as the C config reader accepts)."""
    v = cfg.get(key, default)
    n = len(cfg["depths"])
    return [v] * n if not isinstance(v, list) else v


def block_kinds(cfg, stage):
    """Attention kind of every block of a stage: model.attn is one name, or per stage a name or a list."""
    attn = cfg.get("attn", "native")
    depth = cfg["depths"][stage]
    if isinstance(attn, str):
        return [attn] * depth
    entry = attn[stage]
    return entry if isinstance(entry, list) else [entry] * depth
