"""The one exception every converter raises for a source it cannot convert,
and the warning category for a source that converts but will not run exactly
as it was trained.

Its own module so that the checkpoint readers and the per-architecture mappings
can all raise it without importing each other.
"""


class ConvertError(ValueError):
    """The source checkpoint cannot be converted; the message names the culprit."""


class ConvertWarning(UserWarning):
    """The checkpoint converts, but the engine will not compute exactly what it
    computed in training; weights.convert prints these on stderr."""
