"""The checks on the arguments a network's layers are asked for: a whole number (a batch, an
input dimension) and an image size in pixels (one int, square, or an (H, W) pair). Each raises
`InvalidSpec` naming the argument and the rule it broke.
"""

from __future__ import annotations

import numbers
from typing import Tuple

from ..errors import InvalidSpec


def whole_number(name: str, value, minimum: int = 1) -> int:
    """A whole number argument, checked.

    Args:
        name: the argument's name, for the error.
        value: the value given (a bool is not a whole number).
        minimum: the smallest value allowed.

    Returns:
        ``value`` as an int; `InvalidSpec` when it is not a whole number >= ``minimum``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidSpec(name, value, f"must be a whole number >= {minimum}")
    return int(value)


def image_pixels(image) -> Tuple[int, int]:
    """An image size in pixels, checked.

    Args:
        image: one int (square) or an (H, W) pair.

    Returns:
        (H, W); `InvalidSpec` for anything else.
    """
    if isinstance(image, (tuple, list)):
        if len(image) != 2:
            raise InvalidSpec("image", image, "must be one int (square) or an (H, W) pair of pixels")
        return (whole_number("image", image[0]), whole_number("image", image[1]))
    v = whole_number("image", image)
    return (v, v)
