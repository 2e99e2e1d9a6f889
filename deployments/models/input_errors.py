"""The errors bad inputs raise, without torch (the ingress and the image checks use them)."""

from __future__ import annotations


class InputError(ValueError):
    """A request's inputs are invalid; the message names the field and the problem (-> HTTP 4xx)."""

    problem = "invalid_input"  # the ErrorResponse type (deployments/ingress/errors.py)


class UnsupportedMediaType(InputError):
    """An input in a format the server does not take, e.g. a GIF image (-> HTTP 415)."""

    problem = "unsupported_media_type"
