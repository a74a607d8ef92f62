"""The DLA admission reserve (DLA.md "Admission reserve").

A waiting request with a prediction is admitted only when the free blocks cover its prompt and
its whole predicted output, ``ceil((num_prompt_tokens + predicted_length) / block_size)``
blocks; without a prediction the engine's own rule applies, ``ceil(num_prompt_tokens /
block_size)``. The prediction already carries its safety margin, so it is not inflated again.

Unlike the victim rule, these functions are not called through the host contract: they serve
the engine integration and the simulator, whose inputs are the program's own. A bad input is
a programmer error, so they raise ``ValueError`` naming what was expected and what was found,
rather than guessing.
"""

from __future__ import annotations

__all__ = ["admit", "blocks_needed"]


def _whole(value: object, what: str, *, minimum: int) -> int:
    """``value`` when it is an ``int`` (not a ``bool``) >= ``minimum``; else ValueError."""
    if type(value) is not int:
        raise ValueError(f"{what}: expected an int >= {minimum}, found {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{what}: expected an int >= {minimum}, found {value}")
    return value


def _attribute(request: object, name: str) -> object:
    try:
        return getattr(request, name)
    except AttributeError:
        raise ValueError(
            f"request.{name}: expected an attribute, found none on {type(request).__name__}"
        ) from None


def blocks_needed(request: object, block_size: int) -> int:
    """The KV blocks ``request`` must find free to be admitted.

    ``request`` is any object with ``num_prompt_tokens`` and, optionally,
    ``predicted_length`` (absent or ``None`` = no prediction), such as
    :class:`dla_plugin.contract.WaitingRequest`.

    Raises:
        ValueError: ``block_size`` is not an ``int`` >= 1; ``num_prompt_tokens`` is missing
            or not an ``int`` >= 0; ``predicted_length`` is neither ``None`` nor an ``int``
            >= 0. (``bool`` is not accepted as an ``int``.)
    """
    size = _whole(block_size, "block_size", minimum=1)
    tokens = _whole(_attribute(request, "num_prompt_tokens"), "num_prompt_tokens", minimum=0)
    predicted = getattr(request, "predicted_length", None)
    if predicted is not None:
        # DLA.md: the prompt and the whole predicted output, the prediction taken as given.
        tokens += _whole(predicted, "predicted_length", minimum=0)
    return -(-tokens // size)  # ceil without floats: exact for any int


def admit(request: object, free_blocks: int, block_size: int) -> bool:
    """Whether ``request`` may be admitted with ``free_blocks`` free KV blocks.

    True when :func:`blocks_needed` ``<= free_blocks``.

    Raises:
        ValueError: ``free_blocks`` is not an ``int`` >= 0, or as :func:`blocks_needed`.
    """
    free = _whole(free_blocks, "free_blocks", minimum=0)
    return blocks_needed(request, block_size) <= free
