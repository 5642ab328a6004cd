"""ALBERT's cross-layer parameter sharing: which sub-layers the encoder blocks share."""

SHARING_MODES = ("none", "attention", "feedforward", "all")


def sharing_mode(share_layers):
    """`share_layers` as one of `SHARING_MODES`: `True` means `"all"`, `False` `"none"`.

    Raises:
        ValueError: for anything else, naming the choices.
    """
    if share_layers is True or share_layers is False:
        return "all" if share_layers else "none"
    if share_layers not in SHARING_MODES:
        raise ValueError(
            f"Expected `share_layers` in {SHARING_MODES} (or a bool: True is 'all'). "
            f"Received: share_layers={share_layers!r}"
        )
    return share_layers


def encoder_blocks(make_block, num_layers, mode):
    """The stack's `num_layers` blocks, sharing what `mode` says with the first.

    Args:
        make_block: `make_block(name, **sharing)` makes one `TransformerEncoderBlock`;
            `sharing` holds `shared_attention` or `shared_feedforward`.
        num_layers: blocks in the stack.
        mode: one of `SHARING_MODES`. `"all"` repeats one block; `"attention"` and
            `"feedforward"` give every block its own other sub-layer.

    Returns:
        A list of `num_layers` blocks (the same object repeated for `"all"`).
    """
    if mode == "all":
        return [make_block("transformer_layer_shared")] * num_layers
    first = make_block("transformer_layer_0")
    sharing = {}
    if mode == "attention":
        sharing = {"shared_attention": first}
    elif mode == "feedforward":
        sharing = {"shared_feedforward": first}
    return [first] + [make_block(f"transformer_layer_{i}", **sharing) for i in range(1, num_layers)]
