"""The one exception every converter raises for a source it cannot convert.

Its own module so that the checkpoint readers and the per-architecture mappings
can all raise it without importing each other.
"""


class ConvertError(ValueError):
    """The source checkpoint cannot be converted; the message names the culprit."""
